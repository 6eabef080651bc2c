// Fuzzes the checkpoint decoder: decode or throw DataError.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sfb/core/error.h"
#include "sfb/io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto c = sfb::io::decode_checkpoint(std::as_bytes(std::span(data, size)), "fuzz.ckpt");
    if (sfb::io::encode_checkpoint(c).size() != size) __builtin_trap();
  } catch (const sfb::DataError&) {
  }
  return 0;
}
