#include "sfb/runtime/update_applier.h"

#include <algorithm>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif
#include <vector>

#include "sfb/core/error.h"

namespace sfb::runtime {

namespace {
// Rows of W per block of the sparse kernel: each column's per-entry loop is shared by this many
// rows. More rows amortise the loop better, but rows of W lie a multiple of 4 KiB apart when D is
// a power of two and share L1 sets: 16 rows thrashed the 8-way L1 (4x slower), 8 is the best
// measured (bench/update_bench.cc). Columns are visited in ascending order: visiting them grouped
// by entry count (to make the per-column loop's branch predictable) was measured 1.4x slower,
// since W is then accessed out of order.
constexpr int kRows = 8;
using Block = Eigen::Array<float, kRows, 1>;

// buf[(c - c0) * 8 + q] = rows[q * D + c] for c in [c0, c1): 8 rows of W into a [column][8] tile.
// perf showed the scalar copies at two thirds of the tiled kernel; 4 x 4 SSE transposes (x86-64
// baseline, no -march needed) move four columns of four rows per step.
void pack_tile(const float* rows, int64_t D, int64_t c0, int64_t c1, float* buf) {
  int64_t c = c0;
#if defined(__SSE2__)
  for (; c + 4 <= c1; c += 4) {
    for (int q0 = 0; q0 < kRows; q0 += 4) {
      __m128 r0 = _mm_loadu_ps(rows + (q0 + 0) * D + c), r1 = _mm_loadu_ps(rows + (q0 + 1) * D + c);
      __m128 r2 = _mm_loadu_ps(rows + (q0 + 2) * D + c), r3 = _mm_loadu_ps(rows + (q0 + 3) * D + c);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      float* b = buf + (c - c0) * kRows + q0;
      _mm_storeu_ps(b, r0);
      _mm_storeu_ps(b + kRows, r1);
      _mm_storeu_ps(b + 2 * kRows, r2);
      _mm_storeu_ps(b + 3 * kRows, r3);
    }
  }
#endif
  for (; c < c1; ++c)
    for (int q = 0; q < kRows; ++q) buf[(c - c0) * kRows + q] = rows[q * D + c];
}

// The inverse of pack_tile.
void unpack_tile(const float* buf, int64_t c0, int64_t c1, float* rows, int64_t D) {
  int64_t c = c0;
#if defined(__SSE2__)
  for (; c + 4 <= c1; c += 4) {
    for (int q0 = 0; q0 < kRows; q0 += 4) {
      const float* b = buf + (c - c0) * kRows + q0;
      __m128 r0 = _mm_loadu_ps(b), r1 = _mm_loadu_ps(b + kRows), r2 = _mm_loadu_ps(b + 2 * kRows),
             r3 = _mm_loadu_ps(b + 3 * kRows);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_storeu_ps(rows + (q0 + 0) * D + c, r0);
      _mm_storeu_ps(rows + (q0 + 1) * D + c, r1);
      _mm_storeu_ps(rows + (q0 + 2) * D + c, r2);
      _mm_storeu_ps(rows + (q0 + 3) * D + c, r3);
    }
  }
#endif
  for (; c < c1; ++c)
    for (int q = 0; q < kRows; ++q) rows[q * D + c] = buf[(c - c0) * kRows + q];
}
}  // namespace

void UpdateApplier::apply(Matrix& W, std::span<const SfBatch* const> batches, std::span<const float> alpha) {
  SFB_ENFORCE(alpha.empty() || alpha.size() == batches.size(), "{} multipliers for {} batches", alpha.size(),
              batches.size());
  auto alpha_of = [&](size_t i) { return alpha.empty() ? 1.0f : alpha[i]; };
  int64_t dense_rows = 0;
  int dense_batches = 0;
  std::vector<const SfBatch*> sparse;
  std::vector<float> sparse_alpha;
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    const SfBatch* b = batches[bi];
    SFB_ENFORCE(W.rows() == b->J && W.cols() == b->D, "W is {}x{}, batch {}x{}", W.rows(), W.cols(), b->J, b->D);
    if (b->count == 0) continue;
    if (b->sparse_v) {
      sparse.push_back(b);
      sparse_alpha.push_back(alpha_of(bi));
    } else {
      dense_rows += b->count;
      ++dense_batches;
    }
  }
  const double J = static_cast<double>(W.rows()), D = static_cast<double>(W.cols());
  const bool stack = dense_batches > 1 && (dense_batches - 1) * J * D > 2.0 * static_cast<double>(dense_rows) * (J + D);
  if (!stack) {
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const SfBatch* b = batches[bi];
      if (b->sparse_v || b->count == 0) continue;
      if (alpha_of(bi) == 1.0f)
        W.noalias() += b->u.transpose() * b->v;
      else
        W.noalias() += alpha_of(bi) * (b->u.transpose() * b->v);
    }
  } else {
    // One GEMM for all dense batches: stack U (PK x J) and V (PK x D) in batch order.
    if (u_stack_.rows() < dense_rows || u_stack_.cols() != W.rows()) u_stack_.resize(dense_rows, W.rows());
    if (v_stack_.rows() < dense_rows || v_stack_.cols() != W.cols()) v_stack_.resize(dense_rows, W.cols());
    int64_t r = 0;
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const SfBatch* b = batches[bi];
      if (b->sparse_v || b->count == 0) continue;
      if (alpha_of(bi) == 1.0f)
        u_stack_.middleRows(r, b->count) = b->u;
      else
        u_stack_.middleRows(r, b->count) = alpha_of(bi) * b->u;
      v_stack_.middleRows(r, b->count) = b->v;
      r += b->count;
    }
    W.noalias() += u_stack_.topRows(dense_rows).transpose() * v_stack_.topRows(dense_rows);
  }
  if (!sparse.empty())
    apply_sparse(W, sparse, alpha.empty() ? std::span<const float>() : std::span<const float>(sparse_alpha));
}

// Regroups every non-zero of the batches by column, keeping batch and pair order within a column;
// returns the number of pairs.
int64_t UpdateApplier::group_by_column(std::span<const SfBatch* const> batches, int64_t D) {
  col_ptr_.assign(static_cast<size_t>(D) + 1, 0);
  int64_t nnz = 0;
  for (const SfBatch* b : batches) {
    for (int32_t c : b->v_index) ++col_ptr_[static_cast<size_t>(c) + 1];
    nnz += static_cast<int64_t>(b->v_index.size());
  }
  cols_used_.clear();
  for (int64_t c = 0; c < D; ++c) {
    if (col_ptr_[static_cast<size_t>(c) + 1] > 0) cols_used_.push_back(static_cast<int32_t>(c));
    col_ptr_[static_cast<size_t>(c) + 1] += col_ptr_[static_cast<size_t>(c)];
  }
  entry_pair_.resize(static_cast<size_t>(nnz));
  entry_v_.resize(static_cast<size_t>(nnz));
  int64_t pairs = 0;
  for (const SfBatch* b : batches) {
    for (int32_t i = 0; i < b->count; ++i, ++pairs) {
      for (int64_t k = b->v_row_ptr[static_cast<size_t>(i)]; k < b->v_row_ptr[static_cast<size_t>(i) + 1]; ++k) {
        // col_ptr_[c] is advanced past each entry of column c; shifted back below.
        const auto pos = static_cast<size_t>(col_ptr_[static_cast<size_t>(b->v_index[static_cast<size_t>(k)])]++);
        entry_pair_[pos] = static_cast<int32_t>(pairs);
        entry_v_[pos] = b->v_value[static_cast<size_t>(k)];
      }
    }
  }
  for (int64_t c = D; c > 0; --c) col_ptr_[static_cast<size_t>(c)] = col_ptr_[static_cast<size_t>(c) - 1];
  col_ptr_[0] = 0;
  return pairs;
}

// U repacked so that block b's coefficients of pair p are u_blocked_[(b * pairs + p) * kRows + 0..kRows-1],
// each multiplied by its batch's alpha.
void UpdateApplier::pack_u_blocks(std::span<const SfBatch* const> batches, std::span<const float> alpha, int64_t J,
                                  int64_t pairs) {
  const int64_t blocks = (J + kRows - 1) / kRows;
  u_blocked_.assign(static_cast<size_t>(blocks * pairs * kRows), 0.0f);
  int64_t p = 0;
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    const SfBatch* b = batches[bi];
    const float a = alpha.empty() ? 1.0f : alpha[bi];
    for (int32_t i = 0; i < b->count; ++i, ++p) {
      const float* u = b->u.data() + static_cast<int64_t>(i) * J;
      for (int64_t j = 0; j < J; ++j)
        u_blocked_[static_cast<size_t>(((j / kRows) * pairs + p) * kRows + j % kRows)] = a * u[j];
    }
  }
}

void UpdateApplier::apply_sparse(Matrix& W, std::span<const SfBatch* const> batches, std::span<const float> alpha) {
  const int64_t J = W.rows();
  const int64_t D = W.cols();
  const int64_t pairs = group_by_column(batches, D);
  pack_u_blocks(batches, alpha, J, pairs);
  const int64_t blocks = (J + kRows - 1) / kRows;
  float* w = W.data();
  const int64_t* cp = col_ptr_.data();
  const int32_t* ep = entry_pair_.data();
  const float* ev = entry_v_.data();
  const int32_t* used = cols_used_.data();
  const auto n_used = static_cast<int64_t>(cols_used_.size());
  // When most columns are touched, a block's 8 rows are copied tile by tile into a [column][8]
  // buffer: the accumulated increments are then added with one vector operation per column, and
  // W is read and written in sequential runs per row instead of 8 scattered elements per column
  // (rows of W lie D floats apart and, for D a power of two, share L1 sets).
  const bool tiled = n_used * 2 > D;
#pragma omp parallel for schedule(static) num_threads(threads_) if (threads_ > 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kRows;
    const int rows = static_cast<int>(std::min<int64_t>(kRows, J - j0));
    const float* ub = u_blocked_.data() + blk * pairs * kRows;
    float* row = w + j0 * D;
    if (tiled && rows == kRows) {
      constexpr int64_t kTile = 128;
      alignas(64) float buf[kTile * kRows];
      int64_t n = 0;
      for (int64_t c0 = 0; c0 < D && n < n_used; c0 += kTile) {
        const int64_t c1 = std::min(D, c0 + kTile);
        if (used[n] >= c1) continue;
        pack_tile(row, D, c0, c1, buf);
        for (; n < n_used && used[n] < c1; ++n) {
          const int32_t c = used[n];
          Block acc = Block::Zero();
          for (int64_t e = cp[c]; e < cp[c + 1]; ++e)
            acc += ev[e] * Eigen::Map<const Block>(ub + int64_t{ep[e]} * kRows);
          Eigen::Map<Block, Eigen::Aligned32>(buf + (c - c0) * kRows) += acc;
        }
        unpack_tile(buf, c0, c1, row, D);
      }
      continue;
    }
    for (int64_t n = 0; n < n_used; ++n) {
      const int32_t c = used[n];
      Block acc = Block::Zero();
      for (int64_t e = cp[c]; e < cp[c + 1]; ++e) acc += ev[e] * Eigen::Map<const Block>(ub + int64_t{ep[e]} * kRows);
      if (rows == kRows) {
        for (int q = 0; q < kRows; ++q) row[q * D + c] += acc[q];
      } else {
        for (int q = 0; q < rows; ++q) row[q * D + c] += acc[q];
      }
    }
  }
}

}  // namespace sfb::runtime
