#pragma once
// W in file order (J x D row-major) as a stream of blocks of whole rows, so that checksums, model
// files, checkpoints and their broadcast never need a second W: a replica stored feature-major or
// carrying a scale is transposed or scaled one block at a time into a bounded buffer. A block holds
// at most about kRowBlockBytes (at least one row).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "sfb/core/collective_cost.h"
#include "sfb/core/tensor.h"

namespace sfb {

inline constexpr int64_t kRowBlockBytes = int64_t{8} << 20;

// Rows per block for rows of `cols` floats: about `bytes`, at least 1.
inline int64_t rows_per_block(int64_t cols, int64_t bytes = kRowBlockBytes) {
  return std::max<int64_t>(1, bytes / (4 * std::max<int64_t>(1, cols)));
}

// The dense baseline's all-reduce calls on W of `rows` x `cols` stored floats, as (first row,
// rows): a first block of an eighth of a block's rows (nothing is on the wire until one is formed),
// then whole blocks of dense_allreduce_block_bytes. The engine cuts by them and the predictor counts
// them (the 2048 x 2048 job: 17 calls, the first of 16 rows).
// A block's rows, not capped at W's: a W of less than an eighth of a block is one call.
inline int64_t dense_allreduce_block_rows(int64_t rows, int64_t cols) {
  return rows_per_block(cols, dense_allreduce_block_bytes(4 * rows * cols));
}
inline std::vector<std::pair<int64_t, int64_t>> dense_allreduce_cuts(int64_t rows, int64_t cols) {
  const int64_t per = dense_allreduce_block_rows(rows, cols);
  std::vector<std::pair<int64_t, int64_t>> cuts;
  for (int64_t r0 = 0, n = std::max<int64_t>(1, per / 8); r0 < rows; r0 += n, n = per)
    cuts.emplace_back(r0, std::min<int64_t>(n, rows - r0));
  return cuts;
}
// How many (dense_allreduce_cuts' size, without listing them).
inline int64_t dense_allreduce_calls(int64_t rows, int64_t cols) {
  const int64_t per = dense_allreduce_block_rows(rows, cols);
  const int64_t first = std::max<int64_t>(1, per / 8);
  return rows <= first ? 1 : 1 + (rows - first + per - 1) / per;
}

// The reconciliation's blocks on W of `rows` x `cols` floats (runtime/reconciler.h): rows of
// reconcile_block_bytes, at most W's; and its all-reduce calls, the blocks and one of the drift's
// float.
inline int64_t reconcile_block_rows(int64_t rows, int64_t cols) {
  return std::min(std::max<int64_t>(1, rows), rows_per_block(cols, reconcile_block_bytes(4 * rows * cols)));
}
inline int64_t reconcile_calls(int64_t rows, int64_t cols) {
  const int64_t per = reconcile_block_rows(rows, cols);
  return (std::max<int64_t>(1, rows) + per - 1) / per + 1;
}

// FMS's blocks are whole rows of W's stored matrix (`cols` floats each): the block height for a
// shard of `shard_rows` (baselines/ps_codec.h cuts by it), the shard's blocks, and the most rows a
// server of S holds (server s has rows [J s / S, J (s + 1) / S): floor(J / S) or one more).
inline int64_t ps_block_rows(int64_t shard_rows, int64_t cols) {
  return rows_per_block(cols, ps_block_bytes(std::max<int64_t>(0, shard_rows) * 4 * std::max<int64_t>(1, cols)));
}
inline int64_t ps_shard_blocks(int64_t shard_rows, int64_t cols) {
  const int64_t h = ps_block_rows(shard_rows, cols);
  return std::max<int64_t>(1, (std::max<int64_t>(0, shard_rows) + h - 1) / h);
}
inline int64_t ps_max_shard_rows(int64_t rows, int servers) {
  const int64_t S = std::max(1, servers);
  return (std::max<int64_t>(0, rows) + S - 1) / S;
}
// The server with the most blocks takes ps_rounds windows of kPsWindowBlocks a clock under BSP (at
// least 1), each of which waits for every worker's pushes of its blocks before their pulls come
// back. (A shard of one row fewer can have more blocks: 15 rows go in 15 blocks of 1 where 16 go
// in 8 of 2.)
inline int64_t ps_rounds(int64_t rows, int64_t cols, int servers) {
  const int64_t most = ps_max_shard_rows(rows, servers), least = std::max<int64_t>(0, rows) / std::max(1, servers);
  const int64_t blocks = std::max(ps_shard_blocks(most, cols), least > 0 ? ps_shard_blocks(least, cols) : 1);
  return (blocks + kPsWindowBlocks - 1) / kPsWindowBlocks;
}

// A J x D matrix in file order: read(row_begin, rows, out) writes rows [row_begin, row_begin +
// rows) into `out` (rows x cols floats, row-major).
struct RowSource {
  int64_t rows = 0, cols = 0;
  std::function<void(int64_t row_begin, int64_t rows, float* out)> read;
};

// Where rows in file order go: write(row_begin, rows, data) with rows x cols floats.
using RowSink = std::function<void(int64_t row_begin, int64_t rows, const float* data)>;

// A matrix that already is in file order (a copy of each block; for tests and small matrices).
RowSource row_source(const Matrix& W);
// The stored matrix of a replica in layout `l`, times `scale`, in file order.
RowSource row_source(const Matrix& stored, Layout l, float scale = 1.0f);
// Writes file-order rows into a stored matrix of layout `l` (already of the stored shape).
RowSink row_sink(Matrix& stored, Layout l);

// Calls fn(row_begin, rows, data) for every block of `src` in order, through one buffer of at most
// about `block_bytes`.
void for_each_row_block(const RowSource& src, const RowSink& fn, int64_t block_bytes = kRowBlockBytes);

class AtomicFileWriter;
class FileReader;
// The data of a model file or checkpoint: `src` appended to `out` block by block; returns the
// CRC-32 of those bytes continued from `crc`.
uint32_t write_row_blocks(AtomicFileWriter& out, const RowSource& src, uint32_t crc);
// A rows x cols float32 matrix in file order read from `in` (at its current position) into `fn`,
// block by block; returns the CRC-32 of its bytes continued from `crc`.
uint32_t read_row_blocks(FileReader& in, int64_t rows, int64_t cols, const RowSink& fn, uint32_t crc,
                         int64_t block_bytes = kRowBlockBytes);

}  // namespace sfb
