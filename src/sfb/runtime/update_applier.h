#pragma once
// The update kernel: W += sum over batches of U^T V (u already carries the step), with W stored in
// the model's layout (sfb/core/tensor.h). Runs on the update thread with W write-locked.
//
// All batches of one call are applied as one rank-(sum of K) update, so W is swept once per call
// instead of once per batch:
//   * dense v: the batches' U and V are stacked into reused workspaces and multiplied in one GEMM,
//     J x PK times PK x D row-major, or (W^T += V^T U) D x PK times PK x J feature-major: the
//     transposes are folded into the BLAS call;
//   * sparse v: the non-zeros of all pairs are regrouped by column (a counting sort, O(nnz + D),
//     into reused buffers), keeping pair order within a column. Then
//       - feature-major: every touched column d of W is one contiguous stored row of J floats, and
//         gets sum over its entries of v_id u_i in one pass (core/gathered_sum.h: register tiles,
//         AVX2 / AVX-512 when the CPU has them), split across OpenMP threads by column. W is read
//         and written once per touched column, with no transposes;
//       - row-major: U is repacked as [row block of 8][pair][8], W is walked in blocks of 8 rows,
//         and for every touched column the 8 rows' increments are accumulated in registers and
//         added to W once (sparse_sweep.h; tiled with transposes when most columns are touched).
//     Both layouts form each element's increment from 0 over the same entries in the same order,
//     then add it once: the same floats (bench/update_bench.cc compares their speed).
//   * Dense batches are stacked only when the sweeps of W saved outweigh copying U and V
//     ((batches - 1) J D > 2 PK (J + D)); small models apply batch by batch.
// The float operations depend only on the batches and their order, so replicas that apply the
// same batches in the same order stay bitwise identical.
#include <span>
#include <vector>

#include "sfb/core/sf_batch.h"
#include "sfb/core/tensor.h"

namespace sfb::runtime {

class UpdateApplier {
 public:
  explicit UpdateApplier(int threads, Layout layout = Layout::kRowMajor) : threads_(threads), layout_(layout) {}
  Layout layout() const { return layout_; }
  // W: the stored matrix (J x D row-major, D x J feature-major). alpha (empty, or one per batch):
  // batch b's update is multiplied by alpha[b].
  void apply(Matrix& W, std::span<const SfBatch* const> batches, std::span<const float> alpha = {});
  void apply(Matrix& W, const SfBatch& b) {
    const SfBatch* one[1] = {&b};
    apply(W, one);
  }

 private:
  void apply_dense(Matrix& W, std::span<const SfBatch* const> batches, std::span<const float> alpha);
  void apply_sparse(Matrix& W, std::span<const SfBatch* const> batches, std::span<const float> alpha);
  void apply_sparse_feature_major(Matrix& W, std::span<const SfBatch* const> batches, std::span<const float> alpha,
                                  int64_t pairs);
  int64_t group_by_column(std::span<const SfBatch* const> batches, int64_t D);
  void pack_u_blocks(std::span<const SfBatch* const> batches, std::span<const float> alpha, int64_t J, int64_t pairs);
  int threads_;
  Layout layout_;
  // Reused across calls: no allocation once they have grown.
  Matrix u_stack_, v_stack_;
  std::vector<int64_t> col_ptr_;     // D + 1: entries of column c are [col_ptr_[c], col_ptr_[c+1])
  std::vector<int32_t> cols_used_;   // columns with at least one entry, ascending
  std::vector<int32_t> entry_pair_;  // per entry: the pair (numbered across batches)
  std::vector<int32_t> entry_col_;   // per entry: its column
  std::vector<float> u_blocked_;     // row-major: U repacked [J/8 blocks][pairs][8]; feature-major: [pairs][J]
  std::vector<float> entry_v_;       // per entry: v_ic
};

}  // namespace sfb::runtime
