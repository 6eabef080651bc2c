// Fuzzes the libsvm parser: any text must parse or throw DataError; so must the pass that infers
// the features and the label map (issue 67), and a parse with what it inferred.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "sfb/core/error.h"
#include "sfb/io/libsvm_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    sfb::io::LibsvmOptions fixed;
    fixed.features = 50;
    fixed.classes = 5;
    fixed.label_offset = 1;
    const auto d = sfb::io::parse_libsvm(in, "fuzz.svm", fixed);
    d.validate();
  } catch (const sfb::DataError&) {
  }
  try {
    std::istringstream scan_in(in.str());
    const auto sum = sfb::io::scan_libsvm(scan_in, "fuzz.svm");
    if (sum.max_index > 0 && sum.labels.size() >= 2) {
      sfb::io::LibsvmOptions opt;
      opt.features = sum.max_index;
      opt.classes = static_cast<int64_t>(sum.labels.size());
      opt.label_map = sum.labels;
      std::istringstream parse_in(in.str());
      sfb::io::parse_libsvm(parse_in, "fuzz.svm", opt).validate();
    }
  } catch (const sfb::DataError&) {
  }
  return 0;
}
