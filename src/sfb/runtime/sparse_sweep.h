#pragma once
// The inner sweep of the sparse update (update_applier.h): for one block of kSweepRows rows of W,
// every touched column c gets sum_e v_e * U[pair_e][rows] over its entries e.
// One kernel for every x86-64 CPU (SSE2, 4 x 4 transposes, mul + add): every rank computes the same
// float operations in the same order whatever its CPU. An AVX2 + FMA version (8 x 8 transposes,
// 16-row groups) was measured slower on the development machine and removed (docs/performance.md).
#include <cstdint>

namespace sfb::runtime {

inline constexpr int kSweepRows = 8;

struct SparseSweep {
  float* w = nullptr;  // W, row-major J x D
  int64_t J = 0, D = 0;
  const int64_t* col_ptr = nullptr;     // D + 1: the entries of column c are [col_ptr[c], col_ptr[c+1])
  const int32_t* entry_pair = nullptr;  // per entry: its pair
  const int32_t* entry_col = nullptr;   // per entry: its column
  const float* entry_v = nullptr;       // per entry: v
  const int32_t* cols = nullptr;        // the touched columns, ascending
  int64_t n_cols = 0;
  const float* u_blocked = nullptr;  // [block][pair][kSweepRows]
  int64_t pairs = 0;
};

// Block `blk` covers rows [8 blk, 8 blk + 8), the last one possibly partial. Every element's
// increment is accumulated from 0 over its column's entries in order, then added to W once (the
// order the feature-major kernel uses too, core/gathered_sum.h). `tiled`: accumulate a tile's
// increments in a [column][8] buffer and add it to the rows with transposes (when most columns are
// touched); otherwise add each touched column's 8 increments in place.
void sweep_block(const SparseSweep& s, int64_t blk, bool tiled);

}  // namespace sfb::runtime
