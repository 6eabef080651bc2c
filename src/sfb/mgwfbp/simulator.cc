#include "sfb/mgwfbp/simulator.h"

#include <algorithm>

namespace sfb::mgwfbp {

std::vector<double> ready_times(const Profile& p) {
  std::vector<double> ready(static_cast<size_t>(p.size()), 0.0);
  double t = 0.0;
  for (int l = p.size() - 1; l >= 0; --l) {
    t += p.layers[static_cast<size_t>(l)].t_b_us;
    ready[static_cast<size_t>(l)] = t;
  }
  return ready;
}

Timeline simulate(const Profile& p, const CostModel& c, const Plan& plan) {
  check_plan(plan, p.size());
  Timeline t;
  t.ready_us = ready_times(p);
  t.backward_us = p.backward_us();
  double prev = 0.0;
  for (const auto& g : plan) {
    // The group can go once its last-ready layer *with parameters* is ready: a layer without
    // gradients holds nothing back.
    int64_t bytes = 0;
    double ready = 0.0;
    for (int l = g.lo; l <= g.hi; ++l) {
      const int64_t b = p.layers[static_cast<size_t>(l)].params * 4;
      bytes += b;
      if (b > 0) ready = std::max(ready, t.ready_us[static_cast<size_t>(l)]);
    }
    const double end = group_end(prev, ready, bytes, c);
    t.start_us.push_back(bytes > 0 ? std::max(prev, ready) : prev);
    t.end_us.push_back(end);
    prev = end;
  }
  t.comm_end_us = prev;
  t.iteration_us = p.forward_us + std::max(t.backward_us, t.comm_end_us);
  t.non_overlapped_us = t.iteration_us - p.forward_us - t.backward_us;
  return t;
}

}  // namespace sfb::mgwfbp
