// Fuzzes the wire decoders: any input must decode or throw CommError, nothing else.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sfb/comm/sf_codec.h"
#include "sfb/core/error.h"
#include "sfb/runtime/control_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  try {
    const sfb::SfBatch b = sfb::comm::decode_sf_batch(bytes, {-1, -1, -1, 1 << 16});
    // A decoded batch re-encodes to the same bytes.
    if (sfb::comm::encode_sf_batch(b).size() != size) __builtin_trap();
  } catch (const sfb::CommError&) {
  }
  try {
    sfb::runtime::decode_control(bytes, -1);
  } catch (const sfb::CommError&) {
  }
  return 0;
}
