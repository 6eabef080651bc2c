#pragma once
// Partial broadcast's fan-out: the one rule for how many peers a worker sends a clock's factors to
// under sfb.broadcast = "halton". The topology (runtime/topology.h), the job's rules
// (runtime/job_rules.h), the byte count and the predictor (predict/scheme_model.h) all take it here.
#include <algorithm>
#include <cstdint>

namespace sfb {

// Among `workers` workers: `q` peers, or ceil(log2 P) when q <= 0 (sfb.halton_q = 0), at most
// P - 1 and at least 1; 0 for a single worker.
constexpr int halton_receivers(int workers, int64_t q) {
  if (workers <= 1) return 0;
  int dflt = 0;
  while ((int64_t{1} << dflt) < workers) ++dflt;  // ceil(log2 P), exact in integers
  return static_cast<int>(std::clamp<int64_t>(q > 0 ? q : dflt, 1, workers - 1));
}

}  // namespace sfb
