#pragma once
// Replica drift: how far the workers' replicas of W are from their mean, relative to the mean's
// size, ||W_p - mean||_F over ||mean||_F averaged over the workers (root mean square). Under full
// broadcast and BSP the replicas are bitwise identical and the drift is exactly 0; partial
// broadcast and SSP/ASP let them differ.
//
// Estimated from a sketch instead of shipping W: m rank-one Gaussian projections
// s_i = a_i^T W b_i (a_i in R^J, b_i in R^D, fixed by the seed, the same on every rank), for which
// E[s_i^2] = ||W||_F^2, so sum_i (s_i - s'_i)^2 / m estimates ||W - W'||_F^2. One GEMM of W with
// the D x m matrix B per evaluation; m doubles travel to rank 0 per rank.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "sfb/core/tensor.h"

namespace sfb::runtime {

class DriftSketcher {
 public:
  DriftSketcher(int64_t J, int64_t D, uint64_t seed, int m = 8);
  // The m projections of scale * W.
  std::vector<double> sketch(const Matrix& W, float scale);

 private:
  Matrix A_, B_, Y_;  // J x m, D x m, J x m
};

// sqrt(mean_p ||s_p - mean||^2 / ||mean||^2) over the workers' sketches, from pairwise
// differences (so identical sketches give exactly 0); 0 when every sketch is 0.
double replica_drift(const std::vector<std::vector<double>>& sketches);

// Rank 0: gathers the workers' sketches per clock; a clock's drift is known once all are in.
class DriftCollector {
 public:
  explicit DriftCollector(int workers) : workers_(workers) {}
  // Returns the drift of `clock` when this was its last missing sketch. Throws CommError on a
  // sketch of another size or a second sketch of one rank for one clock.
  std::optional<double> add(int64_t clock, int sender, std::vector<double> sketch);

 private:
  int workers_;
  std::map<int64_t, std::map<int, std::vector<double>>> pending_;
};

}  // namespace sfb::runtime
