#include "sfb/mgwfbp/simulator.h"

#include <algorithm>

#include "sfb/core/collective_cost.h"
#include "sfb/core/error.h"

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

bool factors_cover(const Profile& p, const Group& g) {
  for (int l = g.lo; l <= g.hi; ++l) {
    const LayerTiming& layer = p.layers[static_cast<size_t>(l)];
    if (layer.params > 0 && layer.sf_floats == 0) return false;
  }
  return true;
}

namespace {

// What a group's layers add up to: dense bytes, one rank's factor bytes, one rank's rebuild time.
struct GroupSums {
  int64_t bytes = 0, sf_bytes = 0;
  double t_sf_us = 0.0;
};

GroupSums group_sums(const Profile& p, const Group& g) {
  GroupSums s;
  for (int l = g.lo; l <= g.hi; ++l) {
    const LayerTiming& layer = p.layers[static_cast<size_t>(l)];
    s.bytes += layer.params * 4;
    s.sf_bytes += layer.sf_floats * 4;
    s.t_sf_us += layer.t_sf_us;
  }
  return s;
}

}  // namespace

double group_time_us(const Profile& p, const CostModel& c, const Group& g) {
  SFB_ENFORCE(!g.sf || factors_cover(p, g),
              "group {}-{} is sent as sufficient factors but holds a layer with parameters and none", g.hi, g.lo);
  const GroupSums s = group_sums(p, g);
  return g.sf ? c.allgather_us(s.sf_bytes) + c.nodes * s.t_sf_us : c.time_us(s.bytes);
}

int64_t group_bytes_sent(const Profile& p, const CostModel& c, const Group& g, int nodes) {
  const GroupSums s = group_sums(p, g);
  const int n = std::max(nodes, 1);
  if (g.sf) return (n - 1) * s.sf_bytes;
  const LinkCost link = link_cost_from_fit(c.a_us, c.b_us_per_byte, n);
  return allreduce_bytes_sent(s.bytes, n, allreduce_direct(s.bytes, n, link));
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
    const double end = bytes > 0 ? std::max(prev, ready) + group_time_us(p, c, g) : prev;
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
