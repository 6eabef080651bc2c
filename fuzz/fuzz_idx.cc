// Fuzzes the IDX readers (plain and gzipped input): read or throw DataError.
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
    // Keep allocations bounded: the header may claim any size.
    int64_t elems = 1;
    for (int64_t d : h.dims) elems = d > 0 && elems < (int64_t{1} << 24) ? elems * d : elems;
    if (elems < (int64_t{1} << 24)) {
      if (h.dims.size() == 1)
        sfb::io::read_idx_labels(path);
      else
        sfb::io::read_idx_images(path);
    }
  } catch (const sfb::DataError&) {
  }
  return 0;
}
