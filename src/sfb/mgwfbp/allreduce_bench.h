#pragma once
// Measures MPI_Allreduce (float sum) on the live communicator for message sizes from min_bytes
// to max_bytes (powers of two): warm-up calls, then `repeats` timed calls per size, each timed
// as the slowest rank's duration; the median is kept. Collective: every rank of `comm` calls it.
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "sfb/mgwfbp/cost_model.h"

namespace sfb::mgwfbp {

struct BenchOptions {
  int64_t min_bytes = 4;
  int64_t max_bytes = int64_t{64} << 20;
  int warmup = 3;
  int repeats = 11;
};

std::vector<Sample> measure_allreduce(MPI_Comm comm, const BenchOptions& opt);

}  // namespace sfb::mgwfbp
