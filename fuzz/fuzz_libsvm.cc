// Fuzzes the libsvm parser: any text must parse or throw DataError.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "sfb/core/error.h"
#include "sfb/io/libsvm_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const auto d = sfb::io::parse_libsvm(in, "fuzz.svm", {50, 5, 1});
    d.validate();
  } catch (const sfb::DataError&) {
  }
  return 0;
}
