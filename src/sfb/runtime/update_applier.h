#pragma once
// The update kernel: W += sum over batches of U^T V (u already carries the step). Runs on the
// update thread with W write-locked.
//
// All batches of one call are applied as one rank-(sum of K) update, so W is swept once per call
// instead of once per batch:
//   * dense v: the batches' U and V are stacked into reused workspaces and multiplied in one GEMM
//     (J x PK times PK x D), parallel through Eigen's OpenMP threads;
//   * sparse v: the non-zeros of all pairs are regrouped by column (a counting sort, O(nnz + D),
//     into reused buffers), and U is repacked as [row block of 8][pair][8] so that a block's
//     coefficients for all pairs (32 bytes each) sit together in L1. W is then walked in blocks
//     of 8 rows, split across OpenMP threads, and for every column that appears the 8 rows'
//     increments sum_i v_ic U(i, j..j+7) are accumulated in registers and added to W once.
//     Only columns that appear are touched, each once per row. When more than half the columns
//     appear, a block's rows are copied tile by tile (128 columns) into a [column][8] buffer, the
//     increments are added with one vector operation per column and the tile is written back:
//     19.6 ms instead of 21.1 ms for J = D = 4096, 1% density, PK = 256 (bench/update_bench.cc,
//     medians of 3), 42.9% instead of 39.0% of the STREAM roofline.
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
  explicit UpdateApplier(int threads) : threads_(threads) {}
  // alpha (empty, or one per batch): batch b's update is multiplied by alpha[b].
  void apply(Matrix& W, std::span<const SfBatch* const> batches, std::span<const float> alpha = {});
  void apply(Matrix& W, const SfBatch& b) {
    const SfBatch* one[1] = {&b};
    apply(W, one);
  }

 private:
  void apply_sparse(Matrix& W, std::span<const SfBatch* const> batches, std::span<const float> alpha);
  int64_t group_by_column(std::span<const SfBatch* const> batches, int64_t D);
  void pack_u_blocks(std::span<const SfBatch* const> batches, std::span<const float> alpha, int64_t J, int64_t pairs);
  int threads_;
  // Reused across calls: no allocation once they have grown.
  Matrix u_stack_, v_stack_;
  std::vector<int64_t> col_ptr_;     // D + 1: entries of column c are [col_ptr_[c], col_ptr_[c+1])
  std::vector<int32_t> cols_used_;   // columns with at least one entry, ascending
  std::vector<int32_t> entry_pair_;  // per entry: the pair (numbered across batches)
  std::vector<int32_t> entry_col_;   // per entry: its column
  std::vector<float> u_blocked_;     // U repacked: [J/8 blocks][pairs][8]
  std::vector<float> entry_v_;       // per entry: v_ic
};

}  // namespace sfb::runtime
