#pragma once
// The hybrid transport's arithmetic (MG-WFBP planner "hybrid"): a fully connected layer's
// gradient over a batch is a sum of outer products, dW = delta^T input (Factors, network.h), so a
// rank can send its factors, B (out + in) floats, instead of dW, out x in floats. The factors
// travel as SF batches (u = delta, v = input: the SFB engine's batch type and codec), and every
// rank rebuilds the averaged gradient from all ranks' factors stacked in rank order with one GEMM,
// so every replica gets bitwise the same gradient (the same inputs in the same order through the
// same BLAS kernel, which sfbd checks the ranks agree on).
#include <cstdint>
#include <vector>

#include "sfb/cnn/network.h"
#include "sfb/core/sf_batch.h"

namespace sfb::cnn {

// A layer's factors as an SF batch (K = batch rows, J = out, D = in, dense v).
SfBatch factor_batch(const Factors& f);

// Reusable buffers of rebuild_gradient (the stacked factors of all ranks).
struct RebuildScratch {
  Matrix delta, input;
};

// dW = scale * sum_r delta_r^T input_r and db = scale * the column sums of every delta_r, from
// every rank's batch of one layer in rank order (scale = 1 / P averages). dW must be out x in and
// db 1 x out.
void rebuild_gradient(const std::vector<const SfBatch*>& ranks, float scale, Matrix& dW, Matrix& db,
                      RebuildScratch& scratch);

// Median time of rebuild_gradient over `reps` runs for a layer of `out` x `in` from `ranks` ranks'
// factors of `batch` rows each (random values), microseconds: the measured t_sf of the planner's
// profile is this divided by `ranks`.
double time_rebuild_us(int64_t out, int64_t in, int64_t batch, int ranks, int reps = 3);

}  // namespace sfb::cnn
