#include "sfb/baselines/scheme_bytes.h"

#include "sfb/comm/topology.h"

namespace sfb::baselines {

double theory_floats_per_clock(const Config& cfg, int workers, int64_t J, int64_t D) {
  const double P = workers, K = static_cast<double>(cfg.optimizer.minibatch), j = static_cast<double>(J),
               d = static_cast<double>(D);
  if (cfg.comm.scheme == "fms") return 2.0 * P * j * d;
  if (cfg.comm.scheme == "allreduce") return 2.0 * (P - 1) * j * d;
  if (cfg.sfb.broadcast != "full") {  // halton, halton-static: Q receivers per clock
    const double q =
        static_cast<double>(comm::Topology::halton_offsets(workers, static_cast<int>(cfg.sfb.halton_q)).size());
    return P * q * K * (j + d);
  }
  return P * (P - 1) * K * (j + d);
}

}  // namespace sfb::baselines
