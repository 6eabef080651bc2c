#pragma once
// Floats each scheme moves over the network per clock, by the formulas of the SFB paper (dense v;
// per-message headers not counted): the "theory" column of sfb-compare.
//   sfb full:     P (P-1) K (J + D)
//   sfb halton:   P Q K (J + D)
//   fms:          2 P J D      (every worker pushes its J x D update and pulls J x D)
//   allreduce:    2 (P-1) J D  (ring: each worker sends 2 (P-1)/P of J x D)
#include <cstdint>

#include "sfb/core/config.h"

namespace sfb::baselines {

double theory_floats_per_clock(const Config& cfg, int workers, int64_t J, int64_t D);

}  // namespace sfb::baselines
