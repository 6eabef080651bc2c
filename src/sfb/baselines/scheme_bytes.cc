#include "sfb/baselines/scheme_bytes.h"

#include "sfb/runtime/topology.h"

namespace sfb::baselines {

double theory_bytes_per_clock(const Config& cfg, int workers, int64_t J, int64_t D, double v_nonzeros) {
  const double P = workers, K = static_cast<double>(cfg.optimizer.minibatch), j = static_cast<double>(J),
               d = static_cast<double>(D);
  if (cfg.comm.scheme == "fms") return 4.0 * 2.0 * P * j * d;
  if (cfg.comm.scheme == "allreduce") return 4.0 * 2.0 * (P - 1) * j * d;
  // One worker's batch of K pairs: u, then v dense or as K + 1 row pointers and the nonzeros.
  const double batch = K * 4.0 * j + (v_nonzeros < 0 ? K * 4.0 * d : 8.0 * (K + 1) + K * 8.0 * v_nonzeros);
  if (cfg.sfb.broadcast != "full") {  // halton, halton-static: Q receivers per clock
    const double q =
        static_cast<double>(runtime::Topology::halton_offsets(workers, static_cast<int>(cfg.sfb.halton_q)).size());
    return P * q * batch;
  }
  return P * (P - 1) * batch;
}

}  // namespace sfb::baselines
