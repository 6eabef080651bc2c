#pragma once
// Wire format of the FMS parameter-server messages (kTagPs): a 48-byte header, then rows x cols
// floats (row-major) for INIT, PUSH and PULL. Every field is checked against the receiver's
// expectations before the payload is read.
//   INIT: rank 0 -> server, the server's initial rows of W (clock = the start clock)
//   PUSH: worker -> server, the worker's dense update of `clock`, the server's rows
//   PULL: server -> worker, the server's rows of W after every worker's clock `clock`
//   BYE:  worker -> server, the job is over (no payload)
//   INIT_ACK: server -> rank 0, an INIT block is in the server's rows (no payload; row_begin and
//          rows name the block): rank 0 keeps at most kPsWindowBlocks INIT blocks a server unanswered
//   SHARD: server -> server, its rows after every worker's push of `clock`, before the model's
//          general proximal step (which may span all rows: every server gathers W and applies it)
#include <algorithm>
#include <cstdint>

#include "sfb/comm/transport.h"
#include "sfb/core/collective_cost.h"
#include "sfb/core/row_blocks.h"
#include "sfb/core/tensor.h"

namespace sfb::baselines {

enum class PsType : uint32_t { kInit = 1, kPush = 2, kPull = 3, kBye = 4, kShard = 5, kInitAck = 6 };

// The header's fields in wire order: u32 magic "FSPS", u32 type, i64 clock, i64 row_begin, i64 rows,
// i64 cols, i64 reserved (0).
inline constexpr uint32_t kPsMagic = 0x53505346;
inline constexpr size_t kPsHeaderBytes = 48;
struct PsHeader {
  PsType type = PsType::kBye;
  int64_t clock = 0;
  int64_t row_begin = 0;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Header + rows x cols floats from `payload` (null for BYE), labelled as global rows
// [row_begin, row_begin + rows) of W.
comm::Bytes encode_ps(PsType type, int64_t clock, int64_t row_begin, int64_t rows, int64_t cols, const float* payload);
// Checks magic, type, sizes and that the payload is exactly rows x cols floats; `from` names the
// sender in errors.
PsHeader decode_ps_header(const comm::Bytes& data, int from);
// The payload of a decoded message.
inline const float* ps_payload(const comm::Bytes& data) {
  return reinterpret_cast<const float*>(data.data() + kPsHeaderBytes);
}

// Rows of W held by server s of S: [J s / S, J (s + 1) / S).
inline int64_t shard_begin(int64_t J, int s, int S) { return J * s / S; }

// PUSH and PULL carry a server's rows in blocks, so a server adds and sends back the first rows of
// a clock while later ones are still arriving (the pipelined push/pull): block b of server s holds
// rows [shard_begin + b R, min(shard_begin + (b + 1) R, shard end)) for R = ps_block_rows(rows, D)
// (core/row_blocks.h).
// A block is an eighth of the shard, between kPsMinBlockBytes and kPsBlockBytes: a small shard is
// still several blocks in flight (one block would put the push, the sum and the pull in series).
// Workers and servers derive the same grid from J, D, S.
struct PsBlocks {
  int64_t begin = 0, end = 0, rows_per_block = 1;  // the shard's rows and the block height
  int64_t count() const { return (end - begin + rows_per_block - 1) / rows_per_block; }
  int64_t block_begin(int64_t b) const { return begin + b * rows_per_block; }
  int64_t block_rows(int64_t b) const { return std::min(rows_per_block, end - block_begin(b)); }
  // The block that starts at `row_begin` with `rows` rows, or -1.
  int64_t block_of(int64_t row_begin, int64_t rows) const {
    if (row_begin < begin || row_begin >= end || (row_begin - begin) % rows_per_block != 0) return -1;
    const int64_t b = (row_begin - begin) / rows_per_block;
    return rows == block_rows(b) ? b : -1;
  }
};
inline PsBlocks ps_blocks(int64_t J, int64_t D, int s, int S) {
  const int64_t b = shard_begin(J, s, S), e = shard_begin(J, s + 1, S);
  return {b, e, ps_block_rows(e - b, D)};
}

}  // namespace sfb::baselines
