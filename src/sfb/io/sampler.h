#pragma once
// Minibatch sampling without replacement within an epoch: the partition's rows are shuffled
// with a per-rank stream of the job seed, handed out K at a time, and reshuffled when an epoch
// ends (a minibatch may span two epochs). Deterministic for a given (seed, rank, n).
#include <cstdint>
#include <vector>

#include "sfb/core/rng.h"

namespace sfb::io {

class EpochSampler {
 public:
  EpochSampler(int64_t n, uint64_t seed, uint64_t stream);
  // Next k row indices in [0, n).
  void next(int64_t k, std::vector<int64_t>& out);
  // Discards the next n indices (as next(n) would draw them).
  void skip(int64_t n);
  int64_t epoch() const { return epoch_; }

 private:
  void reshuffle();
  std::vector<int64_t> perm_;
  Rng rng_;
  size_t pos_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace sfb::io
