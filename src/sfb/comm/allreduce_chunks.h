#pragma once
// The message both all-reduces (ring_allreduce.h, rank_order_allreduce.h) exchange: a 16-byte head
// (i64 id: the clock or call id; i32 step or phase; i32 chunk index) and the chunk's float32 values.
// A buffer of n floats is cut into P chunks, chunk c holding elements [n c / P, n (c + 1) / P).
#include <cstdint>
#include <span>
#include <string>

#include "sfb/comm/transport.h"

namespace sfb::comm {

struct ChunkHead {
  static constexpr size_t kBytes = 16;  // on the wire
  int64_t id = 0;
  int32_t step = 0;
  int32_t chunk = 0;
  bool operator==(const ChunkHead&) const = default;
};

struct ChunkRange {
  int64_t begin = 0, count = 0;
};
inline ChunkRange chunk_range(int64_t n, int c, int P) { return {n * c / P, n * (c + 1) / P - n * c / P}; }

Bytes encode_chunk(const ChunkHead& head, std::span<const float> values);

// Checks that `m` carries `want` with exactly `count` values, or throws CommError naming `who` (the
// receiving rank and algorithm) and what arrived; returns the values.
std::span<const float> expect_chunk(const Message& m, const ChunkHead& want, int64_t count, const std::string& who);

}  // namespace sfb::comm
