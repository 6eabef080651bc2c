#pragma once
// Bytes each scheme moves over the network per clock, by the formulas of the SFB paper with v as
// it travels (per-message headers and Halton's clock markers not counted): the "theory" column of
// sfb-compare. A batch of K pairs: u is 4 K J bytes; v is 4 K D bytes dense, or 8 (K + 1) + 8 K
// nnz(v) bytes sparse (row pointers, then an index and a value per nonzero: sfb/comm/sf_codec.h).
//   sfb full:     P (P-1) batch_bytes
//   sfb halton:   P Q batch_bytes
//   fms:          2 P J D 4      (every worker pushes its J x D update and pulls J x D)
//   allreduce:    2 (P-1) J D 4  (ring: each worker sends 2 (P-1)/P of J x D)
#include <cstdint>

#include "sfb/core/config.h"

namespace sfb::baselines {

// `v_nonzeros`: the mean nonzeros of v per pair when the model writes sparse v (measured: the
// workers count what they send), or a negative value for dense v.
double theory_bytes_per_clock(const Config& cfg, int workers, int64_t J, int64_t D, double v_nonzeros);

}  // namespace sfb::baselines
