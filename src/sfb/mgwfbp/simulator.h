#pragma once
// Timing model of one S-SGD iteration with wait-free backpropagation and merged all-reduces
// (MG-WFBP, Section IV). Time 0 is the start of the backward pass (after the forward pass).
//   ready(l) = sum of t_b over layers l..L-1          (MG-WFBP Eq. 3: tau_b(l) + t_b(l))
//   a group starts at max(end of the previous group, ready of its last-ready layer with
//   parameters)                                     (Eq. 20's recurrence, per group)
//   and lasts T_ar(4 * params) = a + b * bytes (0 for a group without parameters)
//   iteration = t_f + max(backward end, end of the last group)
#include <vector>

#include "sfb/mgwfbp/cost_model.h"
#include "sfb/mgwfbp/plan.h"
#include "sfb/mgwfbp/profile.h"

namespace sfb::mgwfbp {

struct Timeline {
  std::vector<double> ready_us;  // per layer
  std::vector<double> start_us;  // per group
  std::vector<double> end_us;    // per group
  double backward_us = 0.0;
  double comm_end_us = 0.0;
  double iteration_us = 0.0;
  double non_overlapped_us = 0.0;  // iteration - forward - backward
};

// The end of a group given the previous group's end: monotone non-decreasing in prev_end.
inline double group_end(double prev_end_us, double ready_us, int64_t bytes, const CostModel& c) {
  if (bytes <= 0) return prev_end_us;
  return (prev_end_us > ready_us ? prev_end_us : ready_us) + c.time_us(bytes);
}

// True when every layer with parameters in g has sufficient factors: g may be sent as factors.
bool factors_cover(const Profile& p, const Group& g);

// A group's communication time under its transport: the dense all-reduce of 4 * params bytes, or
// (g.sf) the all-gather of every rank's 4 * sf_floats bytes plus rebuilding the gradient from all
// c.nodes ranks' factors (nodes * sum of t_sf). Throws InternalError when an SF group holds a layer
// with parameters but no factors.
double group_time_us(const Profile& p, const CostModel& c, const Group& g);

// Bytes one of `nodes` ranks sends for group g (payload, no message headers): sfb's all-reduce sends
// 2 (N-1)/N of the group's 4 * params bytes, or (N - 1) times them when it takes its direct
// algorithm for a small group (core/collective_cost.h, by the per-step cost of c's fit); the
// factor all-gather N - 1 copies of its 4 * sf_floats bytes.
int64_t group_bytes_sent(const Profile& p, const CostModel& c, const Group& g, int nodes);

std::vector<double> ready_times(const Profile& p);
Timeline simulate(const Profile& p, const CostModel& c, const Plan& plan);

}  // namespace sfb::mgwfbp
