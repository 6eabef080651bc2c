#include "sfb/mgwfbp/planner.h"

#include <cstdlib>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/error.h"
#include "sfb/mgwfbp/simulator.h"

namespace sfb::mgwfbp {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

int64_t bytes_of(const Profile& p, int lo, int hi) {
  int64_t s = 0;
  for (int l = lo; l <= hi; ++l) s += p.layers[static_cast<size_t>(l)].params * 4;
  return s;
}

}  // namespace

Plan plan_wfbp(const Profile& p) {
  Plan plan;
  for (int l = p.size() - 1; l >= 0; --l) plan.push_back({l, l});
  return plan;
}

Plan plan_synceasgd(const Profile& p) { return {{0, p.size() - 1}}; }

// MG-WFBP Algorithm 1. Walk the layers in backward order with one open group [lo, hi]. If the
// open group were sent now it would start at s = max(end of the previous group, ready(lo)).
// Theorem 1's condition for merging layer l = lo - 1 into it: s > ready(l) - a. Proof of the
// local comparison (the previous end fixed, M_g the open group's bytes, M_l layer l's):
//   separate: end = max(s + a + b M_g, ready(l)) + a + b M_l
//   merged:   end = max(s, ready(l)) + a + b (M_g + M_l)
// If s >= ready(l), merging saves exactly a. If s < ready(l): merged - separate =
// ready(l) + b M_g - max(s + a + b M_g, ready(l)), negative iff s + a > ready(l). So merging
// shortens the end time exactly when s > ready(l) - a, and since every later group's end is
// monotone in its predecessor's end, a shorter end never hurts what follows.
//
// Layers without parameters are merged into the open group unconditionally: they add no bytes
// and, having no gradient, do not hold the group back (simulate() starts a group when its
// last-ready layer with parameters is ready).
Plan plan_mgwfbp(const Profile& p, const CostModel& c) {
  const auto ready = ready_times(p);
  Plan plan;
  const int L = p.size();
  Group open{L - 1, L - 1};
  double open_ready = ready[static_cast<size_t>(L - 1)];
  int64_t open_bytes = bytes_of(p, L - 1, L - 1);
  double prev_end = 0.0;
  for (int l = L - 2; l >= 0; --l) {
    const int64_t l_bytes = bytes_of(p, l, l);
    const double s = std::max(prev_end, open_ready);
    if (open_bytes == 0 || l_bytes == 0 || s > ready[static_cast<size_t>(l)] - c.a_us) {
      open.lo = l;  // merge l into the open group
      if (l_bytes > 0) open_ready = ready[static_cast<size_t>(l)];
      open_bytes += l_bytes;
    } else {
      prev_end = group_end(prev_end, open_ready, open_bytes, c);
      plan.push_back(open);
      open = {l, l};
      open_ready = ready[static_cast<size_t>(l)];
      open_bytes = l_bytes;
    }
  }
  plan.push_back(open);
  return plan;
}

// Exact optimum in O(L^2). Number the layers in backward order k = 1..L (k = 1 is layer L-1,
// the first to be ready), so ready(k) is non-decreasing and a group is a run k = i..j that can
// start at ready(j). Let F(j) be the smallest possible end of the last all-reduce over all
// groupings of the first j layers (F(0) = 0). Any grouping of 1..j ends with some run i..j, and
// its end is g(E) = group_end(E, ready(j), bytes(i..j)), where E is the end of the grouping of
// 1..i-1 it extends. g is non-decreasing in E, so among all groupings of 1..i-1 the one with
// the smallest end, F(i-1), gives the smallest end for this last run:
//   F(j) = min over i in 1..j of group_end(F(i-1), ready(j), bytes(i..j)).
// (With layers that have no parameters, ready(j) is replaced by the ready time of the run's
// last-ready layer with parameters, r(i, j) = ready(last_param[j]) when that lies in i..j; the
// argument is unchanged.) Induction on j proves F(j) optimal, and since iteration = t_f + max(backward, F(L)) is
// non-decreasing in F(L), the grouping that attains F(L) minimises the iteration time. Bytes of
// a run come from prefix sums, so each of the L^2 / 2 candidates costs O(1).
namespace {

// The DP of plan_optimal; with `hybrid` each run i..j also may go as sufficient factors when every
// layer with parameters in it has them, and takes the transport that ends it earlier. A run's end
// is then max(E, r) + min(dense, sf): still non-decreasing in E, so the argument is unchanged.
Plan optimal_plan(const Profile& p, const CostModel& c, bool hybrid) {
  const int L = p.size();
  const auto ready = ready_times(p);
  auto layer = [L](int k) { return L - k; };  // backward position k (1-based) -> layer index
  std::vector<int64_t> prefix(static_cast<size_t>(L) + 1, 0), sf_prefix(prefix);
  std::vector<double> t_sf_prefix(static_cast<size_t>(L) + 1, 0.0);
  // last_param[j]: the latest backward position <= j whose layer has parameters (0: none). A run
  // i..j can start at ready(last_param[j]) when last_param[j] >= i (otherwise it has no bytes).
  // dense_only[j]: layers in 1..j with parameters but no factors (a run holding one goes dense).
  std::vector<int> last_param(static_cast<size_t>(L) + 1, 0), dense_only(last_param);
  for (int k = 1; k <= L; ++k) {
    const LayerTiming& x = p.layers[static_cast<size_t>(layer(k))];
    prefix[k] = prefix[k - 1] + x.params * 4;
    sf_prefix[k] = sf_prefix[k - 1] + x.sf_floats * 4;
    t_sf_prefix[k] = t_sf_prefix[k - 1] + x.t_sf_us;
    last_param[k] = x.params > 0 ? k : last_param[k - 1];
    dense_only[k] = dense_only[k - 1] + (x.params > 0 && x.sf_floats == 0 ? 1 : 0);
  }
  std::vector<double> F(static_cast<size_t>(L) + 1, 0.0);
  std::vector<int> from(static_cast<size_t>(L) + 1, 0);
  std::vector<char> sf(static_cast<size_t>(L) + 1, 0);
  for (int j = 1; j <= L; ++j) {
    const double r = last_param[j] > 0 ? ready[static_cast<size_t>(layer(last_param[j]))] : 0.0;
    double best = std::numeric_limits<double>::infinity();
    int arg = 1;
    bool arg_sf = false;
    // Larger groups first: among equal ends prefer fewer all-reduces.
    for (int i = 1; i <= j; ++i) {
      const int64_t bytes = prefix[j] - prefix[i - 1];
      double e = group_end(F[i - 1], r, bytes, c);
      bool by_sf = false;
      if (hybrid && bytes > 0 && dense_only[j] == dense_only[i - 1]) {
        const double e_sf = std::max(F[i - 1], r) + c.allgather_us(sf_prefix[j] - sf_prefix[i - 1]) +
                            c.nodes * (t_sf_prefix[j] - t_sf_prefix[i - 1]);
        by_sf = e_sf < e;
        e = std::min(e, e_sf);
      }
      if (e < best) {
        best = e;
        arg = i;
        arg_sf = by_sf;
      }
    }
    F[j] = best;
    from[j] = arg;
    sf[j] = arg_sf;
  }
  Plan rev;
  for (int j = L; j >= 1; j = from[j] - 1) rev.push_back({layer(j), layer(from[j]), sf[j] != 0});
  return {rev.rbegin(), rev.rend()};
}

}  // namespace

Plan plan_optimal(const Profile& p, const CostModel& c) { return optimal_plan(p, c, false); }

Plan plan_hybrid_optimal(const Profile& p, const CostModel& c) { return optimal_plan(p, c, true); }

Plan plan_hybrid(const Profile& p, const CostModel& c) {
  const auto ready = ready_times(p);
  const int L = p.size();
  const auto has_params = [&p](int l) { return p.layers[static_cast<size_t>(l)].params > 0; };
  const auto prefers_sf = [&](int l) {
    return p.layers[static_cast<size_t>(l)].sf_floats > 0 &&
           group_time_us(p, c, {l, l, true}) < group_time_us(p, c, {l, l, false});
  };
  Plan plan;
  Group open{L - 1, L - 1, prefers_sf(L - 1)};
  bool open_has = has_params(L - 1);
  double open_ready = ready[static_cast<size_t>(L - 1)], prev_end = 0.0;
  for (int l = L - 2; l >= 0; --l) {
    const double r = ready[static_cast<size_t>(l)];
    if (!has_params(l) || !open_has) {  // nothing to weigh: merge (as plan_mgwfbp)
      open.lo = l;
      if (has_params(l)) {  // the open group had none: it takes l's transport and ready time
        open.sf = prefers_sf(l);
        open_ready = r;
        open_has = true;
      }
      continue;
    }
    const bool sf = prefers_sf(l);
    const double s = std::max(prev_end, open_ready);
    if (sf == open.sf) {
      const double merged = std::max(s, r) + group_time_us(p, c, {l, open.hi, sf});
      const double separate = std::max(s + group_time_us(p, c, open), r) + group_time_us(p, c, {l, l, sf});
      if (merged <= separate) {
        open.lo = l;
        open_ready = r;
        continue;
      }
    }
    prev_end = s + group_time_us(p, c, open);
    plan.push_back(open);
    open = {l, l, sf};
    open_ready = r;
  }
  plan.push_back(open);
  return plan;
}

Plan plan_brute_force(const Profile& p, const CostModel& c, bool hybrid) {
  const int L = p.size();
  SFB_CHECK(L >= 1 && L <= (hybrid ? 14 : 20), "brute force needs 1..{} layers, got {}", hybrid ? 14 : 20, L);
  Plan best_plan;
  double best = std::numeric_limits<double>::infinity();
  // Bit k of mask set: a new group starts after backward position k.
  for (uint32_t mask = 0; mask < (1u << (L - 1)); ++mask) {
    Plan plan;
    int hi = L - 1;
    for (int k = 0; k < L - 1; ++k) {
      if (mask & (1u << k)) {
        plan.push_back({L - 1 - k, hi});
        hi = L - 2 - k;
      }
    }
    plan.push_back({0, hi});
    const uint32_t transports = hybrid ? 1u << plan.size() : 1u;
    for (uint32_t bits = 0; bits < transports; ++bits) {
      bool ok = true;
      for (size_t g = 0; g < plan.size(); ++g) {
        plan[g].sf = (bits >> g) & 1u;
        ok = ok && (!plan[g].sf || factors_cover(p, plan[g]));  // every transport where factors exist
      }
      if (!ok) continue;
      const double t = simulate(p, c, plan).comm_end_us;
      if (t < best) {
        best = t;
        best_plan = plan;
      }
    }
  }
  return best_plan;
}

Plan plan_buckets(const Profile& p, int64_t cap_bytes, int64_t first_cap_bytes) {
  // PyTorch DDP's assignment: add gradients in backward order; close the bucket once it holds at
  // least its cap (the first bucket has a smaller cap so communication starts early).
  Plan plan;
  int hi = p.size() - 1;
  int64_t bytes = 0;
  for (int l = p.size() - 1; l >= 0; --l) {
    bytes += p.layers[static_cast<size_t>(l)].params * 4;
    const int64_t cap = plan.empty() ? first_cap_bytes : cap_bytes;
    if (bytes >= cap || l == 0) {
      plan.push_back({l, hi});
      hi = l - 1;
      bytes = 0;
    }
  }
  return plan;
}

Plan plan_horovod(const Profile& p, int64_t threshold_bytes) {
  // Horovod's tensor fusion: a fused buffer never exceeds the threshold (a larger tensor goes
  // alone). The cycle time that decides which ready tensors are fused is not modelled: every
  // tensor is taken as ready for fusion with its neighbours.
  Plan plan;
  int hi = p.size() - 1;
  int64_t bytes = 0;
  for (int l = p.size() - 1; l >= 0; --l) {
    const int64_t lb = p.layers[static_cast<size_t>(l)].params * 4;
    if (l != hi && bytes + lb > threshold_bytes) {
      plan.push_back({l + 1, hi});
      hi = l;
      bytes = 0;
    }
    bytes += lb;
  }
  plan.push_back({0, hi});
  return plan;
}

std::vector<std::string> planner_names() { return {"wfbp", "synceasgd", "mgwfbp", "optimal", "ddp", "horovod:64"}; }

std::vector<std::string> planner_names(const Profile& p) {
  auto names = planner_names();
  if (p.has_factors()) names.insert(names.end(), {"hybrid", "hybrid-optimal"});
  return names;
}

const std::vector<PlannerInfo>& planners() {
  using P = const Profile&;
  using C = const CostModel&;
  static const std::vector<PlannerInfo> all = {
      {"wfbp", "one all-reduce per layer (WFBP)", false, [](P p, C, int64_t) { return plan_wfbp(p); }},
      {"synceasgd", "one all-reduce after backward", false, [](P p, C, int64_t) { return plan_synceasgd(p); }},
      {"mgwfbp", "MG-WFBP's greedy merge", false, [](P p, C c, int64_t) { return plan_mgwfbp(p, c); }},
      {"optimal", "the exact optimal merge", false, [](P p, C c, int64_t) { return plan_optimal(p, c); }},
      {"ddp", "PyTorch DDP's buckets (25 MiB, the first 1 MiB)", false,
       [](P p, C, int64_t) { return plan_buckets(p, 25 * kMiB, kMiB); }},
      {"buckets", "fixed buckets of <MiB>", true,
       [](P p, C, int64_t cap) { return plan_buckets(p, cap, std::min(cap, kMiB)); }},
      {"horovod", "Horovod's fusion buffer of <MiB>", true, [](P p, C, int64_t cap) { return plan_horovod(p, cap); }},
      {"hybrid", "MG-WFBP with fully connected layers as sufficient factors where cheaper", false,
       [](P p, C c, int64_t) { return plan_hybrid(p, c); }},
      {"hybrid-optimal", "the exact optimum over groupings and transports", false,
       [](P p, C c, int64_t) { return plan_hybrid_optimal(p, c); }},
  };
  return all;
}

std::string planner_list() {
  std::vector<std::string> names;
  for (const auto& p : planners()) names.push_back(p.sized ? p.name + ":<MiB>" : p.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

Plan make_plan(const std::string& spec, const Profile& p, const CostModel& c) {
  SFB_CHECK(p.size() > 0, "{}: the profile has no layers", p.source);
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  for (const auto& info : planners()) {
    if (info.name != name || info.sized != (colon != std::string::npos)) continue;
    int64_t cap = 0;
    if (info.sized) {
      const std::string arg = spec.substr(colon + 1);
      char* end = nullptr;
      const double v = std::strtod(arg.c_str(), &end);
      SFB_CHECK(!arg.empty() && end && *end == '\0' && v > 0 && v < 1e9,
                "planner \"{}\": the size must be a positive number of MiB", spec);
      cap = static_cast<int64_t>(v * static_cast<double>(kMiB));
    }
    Plan plan = info.make(p, c, cap);
    check_plan(plan, p.size());
    return plan;
  }
  throw InvalidArgument(fmt::format("unknown planner \"{}\"; planners are {}", spec, planner_list()));
}

}  // namespace sfb::mgwfbp
