// Fuzzes the IDX readers (plain and gzipped input): read or throw DataError. Any header goes in,
// also one whose dimensions claim terabytes: the readers check size products for overflow and
// allocate only as the data arrives, so a claim costs nothing beyond the file's real length.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "sfb/core/error.h"
#include "sfb/io/idx_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/sfb_fuzz_idx_" + std::to_string(::getpid());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const auto h = sfb::io::read_idx_header(path);
    if (h.dims.size() == 1)
      sfb::io::read_idx_labels(path);
    else
      sfb::io::read_idx_images(path);
  } catch (const sfb::DataError&) {
  }
  return 0;
}
