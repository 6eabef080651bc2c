#pragma once
// Merge planners of MG-WFBP. A plan is a list of groups of consecutive layers, in the order they
// are communicated (backward order: the first group holds the last layers). Each group is sent as
// one all-reduce once its last-ready layer (its lowest index) has its gradient and the previous
// all-reduce has finished.
//
//   wfbp       every layer alone (wait-free backpropagation)
//   synceasgd  one group, after the whole backward pass
//   mgwfbp     the paper's Algorithm 1: walk backward, merge layer l-1 into the open group when
//              Theorem 1's condition holds (see plan_mgwfbp)
//   optimal    exact minimum of the iteration time over all groupings, O(L^2) (plan_optimal)
//   ddp        PyTorch DDP buckets: 1 MiB first bucket, then 25 MiB (buckets:<MiB> for another cap)
//   horovod:<MiB>  Horovod tensor fusion: fill a buffer up to the threshold, never beyond
//   hybrid     also chooses each group's transport: dense all-reduce, or (when every layer in it has
//              sufficient factors, Layer::sf_floats) an all-gather of the factors and their
//              reconstruction on every rank (plan_hybrid: greedy; hybrid-optimal: exact)
// The hybrid planners are for prediction (mgwfbp-plan): the CNN executor all-reduces every group.
#include <functional>
#include <string>
#include <vector>

#include "sfb/mgwfbp/cost_model.h"
#include "sfb/mgwfbp/plan.h"
#include "sfb/mgwfbp/profile.h"
#include "sfb/mgwfbp/simulator.h"

namespace sfb::mgwfbp {

Plan plan_wfbp(const Profile& p);
Plan plan_synceasgd(const Profile& p);
Plan plan_mgwfbp(const Profile& p, const CostModel& c);
Plan plan_optimal(const Profile& p, const CostModel& c);
Plan plan_buckets(const Profile& p, int64_t cap_bytes, int64_t first_cap_bytes);
Plan plan_horovod(const Profile& p, int64_t threshold_bytes);
// MG-WFBP's walk with a transport per layer: SF when the layer has factors and they are cheaper
// alone; a layer merges into the open group only with the same transport, when that does not
// delay the group's end (the local comparison of Theorem 1 with each transport's cost).
Plan plan_hybrid(const Profile& p, const CostModel& c);
// Exact minimum over every grouping and every transport per group (O(L^2)).
Plan plan_hybrid_optimal(const Profile& p, const CostModel& c);
// Every grouping (2^(L-1)), with every transport per group when `hybrid`; tests only, L <= 14.
Plan plan_brute_force(const Profile& p, const CostModel& c, bool hybrid = false);

// The planner registry: every name make_plan accepts ("<name>:<MiB>" for a sized one), what it
// does, and how it plans. Docs and help (sfbd --keys) are generated from it.
struct PlannerInfo {
  std::string name;
  std::string help;
  bool sized = false;  // takes a size: "buckets:25"
  std::function<Plan(const Profile&, const CostModel&, int64_t cap_bytes)> make;
};
const std::vector<PlannerInfo>& planners();
// "wfbp, synceasgd, ..., buckets:<MiB>, horovod:<MiB>, hybrid, hybrid-optimal".
std::string planner_list();
// A planner of the registry by its spec ("mgwfbp", "buckets:25"); InvalidArgument naming the list.
Plan make_plan(const std::string& spec, const Profile& p, const CostModel& c);
std::vector<std::string> planner_names();
// Every planner that applies to `p`: planner_names(), and the hybrid ones when p has factors.
std::vector<std::string> planner_names(const Profile& p);

// A planner's predicted iteration at a node count (mgwfbp-plan, the CNN replanner).
struct Prediction {
  std::string planner;
  int nodes = 1;
  int groups = 0;
  double iteration_us = 0.0;
  double non_overlapped_us = 0.0;
  double speedup = 1.0;  // nodes * (t_f + t_b) / iteration: vs one node without communication
};

// Every planner at every node count; cost(n) gives the all-reduce model for n nodes.
template <typename CostFn>
std::vector<Prediction> predict(const Profile& p, const std::vector<std::string>& planners,
                                const std::vector<int>& nodes, CostFn cost) {
  std::vector<Prediction> out;
  const double single = p.forward_us + p.backward_us();
  for (int n : nodes) {
    const CostModel c = cost(n);
    for (const auto& name : planners) {
      const Plan plan = make_plan(name, p, c);
      const Timeline t = simulate(p, c, plan);
      out.push_back(
          {name, n, static_cast<int>(plan.size()), t.iteration_us, t.non_overlapped_us, n * single / t.iteration_us});
    }
  }
  return out;
}

}  // namespace sfb::mgwfbp
