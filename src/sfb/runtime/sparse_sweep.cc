#include "sfb/runtime/sparse_sweep.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sfb::runtime {
namespace {

constexpr int kRows = kSweepRows;
constexpr int64_t kTile = 128;  // columns per tile: 8 rows x 128 floats = 4 KiB, with U's block in L1

// The rows of a partial block (J not a multiple of 8), or few touched columns: accumulate each
// column's 8 increments and add them to W in place. Portable code: the compiler vectorises it.
void sweep_scattered(const SparseSweep& s, int64_t blk) {
  const int64_t j0 = blk * kRows;
  const int rows = static_cast<int>(std::min<int64_t>(kRows, s.J - j0));
  const float* ub = s.u_blocked + blk * s.pairs * kRows;
  float* row = s.w + j0 * s.D;
  for (int64_t n = 0; n < s.n_cols; ++n) {
    const int32_t c = s.cols[n];
    float acc[kRows] = {};
    for (int64_t e = s.col_ptr[c]; e < s.col_ptr[c + 1]; ++e) {
      const float v = s.entry_v[e];
      const float* u = ub + int64_t{s.entry_pair[e]} * kRows;
      for (int q = 0; q < kRows; ++q) acc[q] += v * u[q];
    }
    for (int q = 0; q < rows; ++q) row[q * s.D + c] += acc[q];
  }
}

#if defined(__x86_64__)
// rows[q * D + c] += buf[(c - c0) * 8 + q] with 4 x 4 SSE transposes: the accumulated increments
// of the tile are added to W once, as sweep_scattered adds them.
void add_tile_sse(const float* buf, int64_t c0, int64_t c1, float* rows, int64_t D) {
  int64_t c = c0;
  for (; c + 4 <= c1; c += 4) {
    for (int q0 = 0; q0 < kRows; q0 += 4) {
      const float* b = buf + (c - c0) * kRows + q0;
      __m128 r0 = _mm_loadu_ps(b), r1 = _mm_loadu_ps(b + kRows), r2 = _mm_loadu_ps(b + 2 * kRows),
             r3 = _mm_loadu_ps(b + 3 * kRows);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      float* w = rows + q0 * D + c;
      _mm_storeu_ps(w, _mm_add_ps(_mm_loadu_ps(w), r0));
      _mm_storeu_ps(w + D, _mm_add_ps(_mm_loadu_ps(w + D), r1));
      _mm_storeu_ps(w + 2 * D, _mm_add_ps(_mm_loadu_ps(w + 2 * D), r2));
      _mm_storeu_ps(w + 3 * D, _mm_add_ps(_mm_loadu_ps(w + 3 * D), r3));
    }
  }
  for (; c < c1; ++c)
    for (int q = 0; q < kRows; ++q) rows[q * D + c] += buf[(c - c0) * kRows + q];
}

void sweep_tiled_sse(const SparseSweep& s, int64_t blk) {
  const float* ub = s.u_blocked + blk * s.pairs * kRows;
  float* row = s.w + blk * kRows * s.D;
  alignas(64) float buf[kTile * kRows];
  for (int64_t c0 = 0; c0 < s.D; c0 += kTile) {
    const int64_t c1 = std::min(s.D, c0 + kTile);
    if (s.col_ptr[c0] == s.col_ptr[c1]) continue;
    std::fill(buf, buf + (c1 - c0) * kRows, 0.0f);
    // One flat pass over the tile's entries (sorted by column, pair order within a column).
    for (int64_t e = s.col_ptr[c0]; e < s.col_ptr[c1]; ++e) {
      const __m128 v = _mm_set1_ps(s.entry_v[e]);
      const float* u = ub + int64_t{s.entry_pair[e]} * kRows;
      float* b = buf + (s.entry_col[e] - c0) * kRows;
      _mm_store_ps(b, _mm_add_ps(_mm_load_ps(b), _mm_mul_ps(v, _mm_loadu_ps(u))));
      _mm_store_ps(b + 4, _mm_add_ps(_mm_load_ps(b + 4), _mm_mul_ps(v, _mm_loadu_ps(u + 4))));
    }
    add_tile_sse(buf, c0, c1, row, s.D);
  }
}

#endif

}  // namespace

void sweep_block(const SparseSweep& s, int64_t blk, bool use_tiles) {
#if defined(__x86_64__)
  if (use_tiles && (blk + 1) * kRows <= s.J) {
    sweep_tiled_sse(s, blk);
    return;
  }
#endif
  sweep_scattered(s, blk);
}

}  // namespace sfb::runtime
