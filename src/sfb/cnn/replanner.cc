#include "sfb/cnn/replanner.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "sfb/cnn/grad_comm.h"
#include "sfb/comm/collectives.h"
#include "sfb/core/error.h"

namespace sfb::cnn {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

Bytes encode_plan(const mgwfbp::Plan& plan, const mgwfbp::CostModel& cost) {
  ByteWriter w(16 + plan.size() * 16);
  w.put<double>(cost.a_us);
  w.put<double>(cost.b_us_per_byte);
  for (const auto& g : plan) {
    w.put<int64_t>(g.lo);
    w.put<int64_t>(g.hi);
  }
  return w.take();
}

mgwfbp::Plan decode_plan(std::span<const std::byte> bytes, mgwfbp::CostModel& cost, int layers) {
  if (bytes.size() < 16 || (bytes.size() - 16) % 16 != 0)
    throw CommError(fmt::format("plan broadcast of {} bytes", bytes.size()));
  ByteReader r(bytes, "plan broadcast", ByteReader::Source::kMessage);
  cost.a_us = r.get<double>("a_us");
  cost.b_us_per_byte = r.get<double>("b_us_per_byte");
  mgwfbp::Plan plan;
  while (r.remaining() > 0) {
    const auto lo = r.get<int64_t>("lo"), hi = r.get<int64_t>("hi");
    if (lo < 0 || hi < lo || hi >= layers)
      throw CommError(fmt::format("plan broadcast: group [{}, {}] outside the {} param layers", lo, hi, layers));
    plan.push_back({static_cast<int>(lo), static_cast<int>(hi)});
  }
  try {
    mgwfbp::check_plan(plan, layers);
  } catch (const Error& e) {
    throw CommError(fmt::format("plan broadcast: {}", e.what()));
  }
  return plan;
}

void check_planner(const MgwfbpConfig& cfg) {
  SFB_CHECK(cfg.planner.rfind("hybrid", 0) != 0,
            "mgwfbp.planner = \"{}\": the executor all-reduces every group densely; sending layers as sufficient "
            "factors is predicted by mgwfbp-plan (--planners hybrid,hybrid-optimal) but not run yet",
            cfg.planner);
  // The name (and a size argument) as make_plan reads it, on a one-layer profile.
  try {
    mgwfbp::make_plan(cfg.planner, mgwfbp::Profile{"mgwfbp.planner", {{"l", 1, 1.0}}, 0.0}, {});
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("mgwfbp.planner: {}", e.what()));
  }
}

Replanner::Replanner(const MgwfbpConfig& cfg, comm::Transport& t, Network& net, comm::RankOrderAllreduce& allreduce,
                     const mgwfbp::Plan* fixed)
    : cfg_(cfg),
      t_(t),
      net_(net),
      allreduce_(allreduce),
      fixed_(fixed != nullptr),
      profile_iters_(fixed ? 0 : cfg.profile_iters) {
  check_planner(cfg);
  const int L = net.param_layers();
  plan_ =
      fixed ? *fixed
            : mgwfbp::plan_synceasgd(mgwfbp::Profile{"init", std::vector<mgwfbp::Layer>(static_cast<size_t>(L)), 0.0});
  mgwfbp::check_plan(plan_, L);
}

bool Replanner::before_iteration(int64_t it) {
  if (fixed_) return false;
  if (it == profile_iters_ && profile_iters_ > 0) {
    replan(false);
    return true;
  }
  if (cfg_.replan_threshold <= 0 || it <= profile_iters_ || it % cfg_.replan_every != 0) return false;
  // Rank 0 decides; everyone learns it in the same collective.
  const auto flags = comm::allgather_i64(t_, t_.rank() == 0 && drifted() ? 1 : 0);
  if (!flags[0]) return false;
  replan(true);
  ++replans_;
  return true;
}

void Replanner::record(int64_t it, double forward_us, const std::vector<double>& layer_us, double backward_us) {
  if (profiling(it)) {
    prof_layer_us_.push_back(layer_us);
    prof_forward_us_.push_back(forward_us);
  }
  recent_backward_us_.push_back(backward_us);
  if (recent_backward_us_.size() > 50) recent_backward_us_.erase(recent_backward_us_.begin());
}

bool Replanner::drifted() const {
  const double now = median(recent_backward_us_), then = profile_.backward_us();
  return then > 0 && std::abs(now - then) / then > cfg_.replan_threshold;
}

// The profile from this rank's measurements: each param layer's median backward time, with the
// time of the parameterless layers it owns.
mgwfbp::Profile Replanner::measured_profile() const {
  const int L = net_.param_layers();
  mgwfbp::Profile prof;
  prof.source = "live";
  prof.layers.resize(static_cast<size_t>(L));
  for (int p = 0; p < L; ++p) {
    prof.layers[static_cast<size_t>(p)].name = net_.layer(net_.param_layer_index(p)).name();
    prof.layers[static_cast<size_t>(p)].params = net_.param_floats(p);
  }
  for (int i = 0; i < net_.layers(); ++i) {
    std::vector<double> v;
    for (const auto& it : prof_layer_us_) v.push_back(it[static_cast<size_t>(i)]);
    const int owner = std::max(0, net_.owner_param_layer(i));
    prof.layers[static_cast<size_t>(owner)].t_b_us += median(v);
  }
  prof.forward_us = median(prof_forward_us_);
  return prof;
}

// a and b on this communicator: the median of 5 all-reduces per size, from 4 KiB to the model.
std::vector<mgwfbp::Sample> Replanner::time_allreduces() {
  std::vector<mgwfbp::Sample> samples;
  std::vector<float> probe;
  const int64_t max_bytes = std::max<int64_t>(4096, net_.total_params() * 4);
  for (int64_t bytes = 4096;; bytes *= 2) {
    const int64_t b = std::min(bytes, max_bytes);
    probe.assign(static_cast<size_t>(b / 4), 1.0f);
    std::vector<double> times;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = SteadyClock::now();
      allreduce_.run(probe, probe_id_++);
      times.push_back(us_since(t0, SteadyClock::now()));
    }
    samples.push_back({b, median(times)});
    if (b >= max_bytes) break;
  }
  return samples;
}

void Replanner::replan(bool again) {
  const mgwfbp::Profile prof = measured_profile();
  const auto samples = time_allreduces();
  mgwfbp::CostModel cost;
  mgwfbp::Plan chosen;
  if (t_.rank() == 0) {
    const mgwfbp::Fit fit = mgwfbp::fit_cost_model(samples, 0);
    cost = fit.model;
    cost.a_us = std::max(0.0, cost.a_us);  // noise on a fast link; a negative start-up is not physical
    cost.b_us_per_byte = std::max(0.0, cost.b_us_per_byte);
    chosen = mgwfbp::make_plan(cfg_.planner, prof, cost);
    spdlog::info(
        "{}profile: t_f {:.0f} us, t_b {:.0f} us over {} param layers; all-reduce fit a = {:.1f} us, b = {:.3e} "
        "us/B (R^2 {:.3f})",
        again ? "re-" : "", prof.forward_us, prof.backward_us(), net_.param_layers(), cost.a_us, cost.b_us_per_byte,
        fit.r2);
    predictions_ = mgwfbp::predict(prof, mgwfbp::planner_names(), {t_.size()}, [&](int) { return cost; });
    for (const auto& pr : predictions_)
      spdlog::info("  planner {:<10} {:>3} groups, predicted iteration {:>9.0f} us, non-overlapped comm {:>8.0f} us",
                   pr.planner, pr.groups, pr.iteration_us, pr.non_overlapped_us);
    spdlog::info("plan ({}): {}", cfg_.planner, mgwfbp::describe(chosen));
  }
  const Bytes enc = t_.rank() == 0 ? encode_plan(chosen, cost) : Bytes();
  plan_ = decode_plan(comm::broadcast_bytes(t_, 0, enc), cost, net_.param_layers());
  cost_ = cost;
  profile_ = prof;
  predicted_us_ = mgwfbp::simulate(prof, cost, plan_).iteration_us;
}

}  // namespace sfb::cnn
