#include "sfb/runtime/update_applier.h"

#include <algorithm>

#include <vector>

#include "sfb/core/error.h"
#include "sfb/core/gathered_sum.h"
#include "sfb/core/gemm.h"
#include "sfb/runtime/sparse_sweep.h"

namespace sfb::runtime {

namespace {
// Rows of W per block of the sparse kernel: each column's per-entry loop is shared by this many
// rows (one AVX register). More rows amortise the loop better, but rows of W lie a multiple of
// 4 KiB apart when D is a power of two and share L1 sets: 16 rows thrashed the 8-way L1 (4x
// slower), 8 is the best measured (bench/update_bench.cc). Columns are visited in ascending
// order: visiting them grouped by entry count was measured 1.4x slower (W out of order).
constexpr int kRows = kSweepRows;
}  // namespace

void UpdateApplier::apply(Matrix& W, std::span<const SfBatch* const> batches, std::span<const float> alpha) {
  SFB_ENFORCE(alpha.empty() || alpha.size() == batches.size(), "{} multipliers for {} batches", alpha.size(),
              batches.size());
  std::vector<const SfBatch*> sparse;
  std::vector<float> sparse_alpha;
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    const SfBatch* b = batches[bi];
    SFB_ENFORCE(W.rows() == stored_rows(layout_, b->J, b->D) && W.cols() == stored_cols(layout_, b->J, b->D),
                "W is stored {}x{} ({}), batch {}x{}", W.rows(), W.cols(), layout_name(layout_), b->J, b->D);
    if (b->count == 0 || !b->sparse_v) continue;
    sparse.push_back(b);
    sparse_alpha.push_back(alpha.empty() ? 1.0f : alpha[bi]);
  }
  apply_dense(W, batches, alpha);
  if (!sparse.empty())
    apply_sparse(W, sparse, alpha.empty() ? std::span<const float>() : std::span<const float>(sparse_alpha));
}

void UpdateApplier::apply_dense(Matrix& W, std::span<const SfBatch* const> batches, std::span<const float> alpha) {
  auto alpha_of = [&](size_t i) { return alpha.empty() ? 1.0f : alpha[i]; };
  int64_t dense_rows = 0;
  int dense_batches = 0;
  for (const SfBatch* b : batches) {
    if (b->sparse_v || b->count == 0) continue;
    dense_rows += b->count;
    ++dense_batches;
  }
  if (dense_batches == 0) return;
  const int64_t J = batches[0]->J, D = batches[0]->D;
  const bool stack = dense_batches > 1 && (dense_batches - 1) * static_cast<double>(J) * static_cast<double>(D) >
                                              2.0 * static_cast<double>(dense_rows) * static_cast<double>(J + D);
  if (!stack) {
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const SfBatch* b = batches[bi];
      if (b->sparse_v || b->count == 0) continue;
      // W (or W^T) += alpha U^T V: one BLAS call (core/gemm.h).
      gemm_uv(layout_, J, D, b->count, alpha_of(bi), b->u.data(), b->v.data(), 1.0f, W.data(), 0, W.rows());
    }
    return;
  }
  // One GEMM for all dense batches: stack U (PK x J) and V (PK x D) in batch order.
  if (u_stack_.rows() < dense_rows || u_stack_.cols() != J) u_stack_.resize(dense_rows, J);
  if (v_stack_.rows() < dense_rows || v_stack_.cols() != D) v_stack_.resize(dense_rows, D);
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
  gemm_uv(layout_, J, D, dense_rows, 1.0f, u_stack_.data(), v_stack_.data(), 1.0f, W.data(), 0, W.rows());
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
  entry_col_.resize(static_cast<size_t>(nnz));
  entry_v_.resize(static_cast<size_t>(nnz));
  int64_t pairs = 0;
  for (const SfBatch* b : batches) {
    for (int32_t i = 0; i < b->count; ++i, ++pairs) {
      for (int64_t k = b->v_row_ptr[static_cast<size_t>(i)]; k < b->v_row_ptr[static_cast<size_t>(i) + 1]; ++k) {
        // col_ptr_[c] is advanced past each entry of column c; shifted back below.
        const int32_t c = b->v_index[static_cast<size_t>(k)];
        const auto pos = static_cast<size_t>(col_ptr_[static_cast<size_t>(c)]++);
        entry_pair_[pos] = static_cast<int32_t>(pairs);
        entry_col_[pos] = c;
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
  // Every element is written below but the rows of a last, partial block past J: only those are
  // zeroed (zeroing all of it cost as much as the packing).
  u_blocked_.resize(static_cast<size_t>(blocks * pairs * kRows));
  if (J % kRows != 0) std::fill(u_blocked_.begin() + (blocks - 1) * pairs * kRows, u_blocked_.end(), 0.0f);
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
  const int64_t J = batches[0]->J;
  const int64_t D = batches[0]->D;
  const int64_t pairs = group_by_column(batches, D);
  if (layout_ == Layout::kFeatureMajor) {
    apply_sparse_feature_major(W, batches, alpha, pairs);
    return;
  }
  pack_u_blocks(batches, alpha, J, pairs);
  const int64_t blocks = (J + kRows - 1) / kRows;
  const SparseSweep sweep{W.data(),
                          J,
                          D,
                          col_ptr_.data(),
                          entry_pair_.data(),
                          entry_col_.data(),
                          entry_v_.data(),
                          cols_used_.data(),
                          static_cast<int64_t>(cols_used_.size()),
                          u_blocked_.data(),
                          pairs};
  // When most columns are touched, a block's 8 rows are updated tile by tile from a [column][8]
  // buffer: the increments are then accumulated with one vector operation per entry, and W is read
  // and written in sequential runs per row instead of 8 scattered elements per column.
  const bool tiled = sweep.n_cols * 2 > D;
#pragma omp parallel for schedule(static) num_threads(threads_) if (threads_ > 1)
  for (int64_t b = 0; b < blocks; ++b) sweep_block(sweep, b, tiled);
}

// Stored row d of W (feature d's J weights) += sum over column d's entries e of v_e * alpha u_pair(e).
// U is gathered into one [pairs][J] buffer (times each batch's alpha; a lone unscaled batch is used
// in place), so every entry names its u row by the pair number.
void UpdateApplier::apply_sparse_feature_major(Matrix& W, std::span<const SfBatch* const> batches,
                                               std::span<const float> alpha, int64_t pairs) {
  const int64_t J = batches[0]->J;
  const float* u = nullptr;
  if (batches.size() == 1 && (alpha.empty() || alpha[0] == 1.0f)) {
    u = batches[0]->u.data();
  } else {
    u_blocked_.resize(static_cast<size_t>(pairs * J));
    float* out = u_blocked_.data();
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const SfBatch* b = batches[bi];
      const float a = alpha.empty() ? 1.0f : alpha[bi];
      Eigen::Map<Matrix> dst(out, b->count, J);
      if (a == 1.0f)
        dst = b->u;
      else
        dst = a * b->u;
      out += int64_t{b->count} * J;
    }
    u = u_blocked_.data();
  }
  const auto n_cols = static_cast<int64_t>(cols_used_.size());
  float* w = W.data();
  // J in tiles of T floats when the clock's U does not fit in cache (pairs x J floats over 2 MiB:
  // at J = 100,000 and 256 pairs U is 100 MB, and every touched row would read all of it from
  // memory): each pass sweeps every touched row's T columns, so the U tile stays in cache across
  // the rows. Every element is still accumulated over the same entries in the same order: the same
  // floats, tiled or not.
  const int64_t tile =
      pairs * J * 4 <= (int64_t{2} << 20) ? J : std::max<int64_t>(256, (int64_t{2} << 20) / (4 * pairs) / 16 * 16);
  // The touched stored rows lie at irregular distances: the first 4 KiB of the next one is
  // prefetched while this one is swept, so the hardware stream prefetcher does not restart cold at
  // every row (J = 1024, D = 65536, 0.1%: 18.6 -> 16.7 ms, medians of 5, bench/update_bench.cc).
  const int64_t prefetch_lines = std::min<int64_t>(64, (tile * 4 + 63) / 64);
  for (int64_t j0 = 0; j0 < J; j0 += tile) {
    const int64_t len = std::min(tile, J - j0);
#pragma omp parallel for schedule(static) num_threads(threads_) if (threads_ > 1)
    for (int64_t n = 0; n < n_cols; ++n) {
      if (n + 1 < n_cols) {
        const char* next = reinterpret_cast<const char*>(w + int64_t{cols_used_[static_cast<size_t>(n + 1)]} * J + j0);
        for (int64_t l = 0; l < prefetch_lines; ++l) __builtin_prefetch(next + 64 * l, 1);
      }
      const int32_t c = cols_used_[static_cast<size_t>(n)];
      const int64_t e0 = col_ptr_[static_cast<size_t>(c)], e1 = col_ptr_[static_cast<size_t>(c) + 1];
      add_gathered(len, e1 - e0, entry_v_.data() + e0, entry_pair_.data() + e0, u + j0, J, w + int64_t{c} * J + j0);
    }
  }
}

}  // namespace sfb::runtime
