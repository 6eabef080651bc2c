#pragma once
// Wire format of SfBatch messages (little-endian, documented in docs/formats.md); the runtime's
// control messages (runtime/control_codec.h) share its 8-byte head (magic, version, kind).
//
// SfBatch: a 56-byte header, then u (K*J float32), then v: dense K*D float32, or sparse as
// row_ptr (K+1 int64), index (nnz int32), value (nnz float32).
//
//   off size field               off size field
//   0   4    magic 'SFBW'        28  4    D
//   4   2    version (1)         32  4    flags (bit 0: sparse v)
//   6   2    kind (1 = SF batch) 36  4    reserved (0)
//   8   4    sender rank         40  8    nnz of v (sparse) or 0
//   12  4    count K             48  8    payload bytes after the header
//   16  8    clock
//   24  4    J
//
// Decoding validates the header against the received length and the receiver's expectations
// (sender, J, D) before any payload is read; every problem throws CommError naming the field.
#include <cstdint>
#include <span>
#include <vector>

#include "sfb/comm/transport.h"
#include "sfb/core/bytes.h"
#include "sfb/core/sf_batch.h"

namespace sfb::comm {

inline constexpr uint32_t kWireMagic = 0x57424653;  // "SFBW" little-endian
inline constexpr uint16_t kWireVersion = 1;
inline constexpr uint16_t kKindSfBatch = 1;
inline constexpr uint16_t kKindControl = 2;  // runtime/control_codec.h
inline constexpr size_t kSfHeaderBytes = 56;

Bytes encode_sf_batch(const SfBatch& b);
// Size in bytes encode_sf_batch() produces.
int64_t encoded_sf_bytes(const SfBatch& b);

struct SfExpect {
  int sender = -1;  // the transport's source rank; -1: do not check
  int32_t J = -1;   // -1: do not check
  int32_t D = -1;
  int32_t max_count = 1 << 24;
};
SfBatch decode_sf_batch(std::span<const std::byte> data, const SfExpect& expect);

// Several SF batches in one message (the CNN executor's factor groups: one batch per layer): their
// encodings back to back, each with its own header.
Bytes encode_sf_batches(std::span<const SfBatch> batches);
// Splits such a message at the headers' payload sizes and decodes batch i against expect[i]; the
// message must hold exactly expect.size() batches (CommError otherwise, naming the batch).
std::vector<SfBatch> decode_sf_batches(std::span<const std::byte> data, std::span<const SfExpect> expect);

// The first 8 bytes of every message of this codec (magic, version, kind), for codecs of other
// layers that share the header (runtime/control_codec.h). check_wire_head() throws CommError via
// `r` when the message is shorter than `header_bytes` or the magic, version or kind differ.
void put_wire_head(ByteWriter& w, uint16_t kind);
void check_wire_head(ByteReader& r, size_t header_bytes, uint16_t kind);

}  // namespace sfb::comm
