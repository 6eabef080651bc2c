#include "sfb/cnn/replanner.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "sfb/cnn/factor_grads.h"
#include "sfb/cnn/grad_comm.h"
#include "sfb/cnn/plan_codec.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/core/error.h"

namespace sfb::cnn {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median of 5 timed run() calls per message size, from 4 KiB doubling up to max_bytes (at least
// 16 KiB: three sizes for a fit, however small the model); prepare(bytes) builds the probe of a
// size, untimed.
template <typename Prepare, typename Run>
std::vector<mgwfbp::Sample> time_sizes(int64_t max_bytes, Prepare prepare, Run run) {
  std::vector<mgwfbp::Sample> samples;
  max_bytes = std::max<int64_t>(16384, max_bytes);
  for (int64_t bytes = 4096;; bytes *= 2) {
    const int64_t b = std::min(bytes, max_bytes);
    prepare(b);
    std::vector<double> times;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = SteadyClock::now();
      run();
      times.push_back(us_since(t0, SteadyClock::now()));
    }
    samples.push_back({b, median(times)});
    if (b >= max_bytes) break;
  }
  return samples;
}

}  // namespace

void check_planner(const MgwfbpConfig& cfg) {
  // The name (and a size argument) as make_plan reads it, on a one-layer profile.
  try {
    mgwfbp::make_plan(cfg.planner, mgwfbp::Profile{"mgwfbp.planner", {{"l", 1, 1.0}}, 0.0}, {});
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("mgwfbp.planner: {}", e.what()));
  }
}

Replanner::Replanner(const MgwfbpConfig& cfg, comm::Transport& t, Network& net, int64_t batch,
                     const mgwfbp::Plan* fixed, const comm::AllreduceFactory& allreduce)
    : cfg_(cfg),
      t_(t),
      net_(net),
      probe_ch_(t, comm::kTagProbe),
      probe_sf_ch_(t, comm::kTagProbeSf),
      allreduce_(allreduce ? allreduce(probe_ch_, t.size()) : comm::make_rank_order_allreduce(probe_ch_, t.size())),
      allgather_(probe_sf_ch_),
      batch_(batch),
      fixed_(fixed != nullptr),
      profile_end_(fixed ? 0 : cfg.profile_iters) {
  check_planner(cfg);
  const int L = net.param_layers();
  plan_ = fixed ? *fixed
                : mgwfbp::plan_synceasgd(
                      mgwfbp::Profile{"init", std::vector<mgwfbp::LayerTiming>(static_cast<size_t>(L)), 0.0});
  mgwfbp::check_plan(plan_, L);
}

void Replanner::resume_at(int64_t it, const PlanState* restored) {
  if (fixed_ || it == 0) return;
  if (!restored) {
    profile_begin_ = it;
    profile_end_ = it + cfg_.profile_iters;
    return;
  }
  profile_begin_ = profile_end_ = it;
  check_plan_fits(restored->plan, net_, "the checkpoint's plan");
  plan_ = restored->plan;
  SFB_CHECK_DATA(restored->profile.size() == net_.param_layers(), "the checkpoint's profile has {} layers, not {}",
                 restored->profile.size(), net_.param_layers());
  cost_ = restored->cost;
  cost_.nodes = t_.size();
  profile_ = restored->profile;
  predicted_us_ = mgwfbp::simulate(profile_, cost_, plan_).iteration_us;
  if (t_.rank() == 0) {
    predictions_ = mgwfbp::predict(profile_, mgwfbp::planner_names(profile_), {t_.size()}, [&](int) { return cost_; });
    spdlog::info("the checkpoint's plan ({}), measured on this many ranks: {}", cfg_.planner,
                 mgwfbp::describe(plan_, profile_));
  }
}

bool Replanner::before_iteration(int64_t it) {
  if (fixed_) return false;
  if (it == profile_end_ && profile_end_ > profile_begin_) {
    replan(false);
    return true;
  }
  if (cfg_.replan_threshold <= 0 || it <= profile_end_ || it % cfg_.replan_every != 0) return false;
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
  if (!profiling(it) && baseline_backward_us_ <= 0 && ++since_plan_ >= 20)
    baseline_backward_us_ = median(recent_backward_us_);
}

bool Replanner::drifted() const {
  const double now = median(recent_backward_us_), then = baseline_backward_us_;
  return then > 0 && std::abs(now - then) / then > cfg_.replan_threshold;
}

// The profile from this rank's measurements: each param layer's median backward time, with the
// time of the parameterless layers it owns; for a fully connected layer its factors' floats and
// the measured time to rebuild its gradient from all ranks' factors, per rank.
mgwfbp::Profile Replanner::measured_profile() const {
  const int L = net_.param_layers();
  mgwfbp::Profile prof;
  prof.source = "live";
  prof.layers.resize(static_cast<size_t>(L));
  for (int p = 0; p < L; ++p) {
    auto& layer = prof.layers[static_cast<size_t>(p)];
    const LayerInfo li = net_.param_layer(p).info();
    layer.name = net_.param_label(p);
    layer.params = net_.param_floats(p);
    layer.sf_floats = batch_ * net_.factor_floats(p);
    if (layer.sf_floats > 0)
      layer.t_sf_us = time_rebuild_us(li.out.size(), li.in.size(), batch_, t_.size()) / t_.size();
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

// a and b on this communicator: all-reduces up to the model's size.
std::vector<mgwfbp::Sample> Replanner::time_allreduces() {
  std::vector<float> probe;
  return time_sizes(
      net_.total_params() * 4, [&](int64_t bytes) { probe.assign(static_cast<size_t>(bytes / 4), 1.0f); },
      [&] { allreduce_->run(probe, probe_id_++); });
}

// SF all-gathers of one batch per rank, up to max_bytes per rank.
std::vector<mgwfbp::Sample> Replanner::time_allgathers(int64_t max_bytes) {
  SfBatch probe;
  return time_sizes(
      max_bytes,
      [&](int64_t bytes) {
        probe.count = 1;
        probe.J = 1;
        probe.D = static_cast<int32_t>(std::max<int64_t>(1, bytes / 4 - 1));
        probe.u = Matrix::Ones(1, 1);
        probe.v = Matrix::Ones(1, probe.D);
      },
      [&] { allgather_.run({probe}, probe_id_++); });
}

// The all-reduce fit and, when some layer has factors, the all-gather fit (collective: every rank
// times, rank 0's fit counts); `log` gets a line about them.
mgwfbp::CostModel Replanner::fit_costs(const mgwfbp::Profile& prof, std::string& log) {
  const auto ar = time_allreduces();
  int64_t sf_bytes = 0;
  for (const auto& l : prof.layers) sf_bytes += 4 * l.sf_floats;
  const auto ag = sf_bytes > 0 && t_.size() > 1 ? time_allgathers(sf_bytes) : std::vector<mgwfbp::Sample>{};
  mgwfbp::CostModel cost;
  cost.nodes = t_.size();
  const mgwfbp::Fit fit = mgwfbp::fit_cost_model(ar, 0);
  // Noise on a fast link can give a negative start-up; it is not physical.
  cost.a_us = std::max(0.0, fit.model.a_us);
  cost.b_us_per_byte = std::max(0.0, fit.model.b_us_per_byte);
  log =
      fmt::format("all-reduce fit a = {:.1f} us, b = {:.3e} us/B (R^2 {:.3f})", cost.a_us, cost.b_us_per_byte, fit.r2);
  if (ag.empty()) return cost;
  const mgwfbp::Fit agf = mgwfbp::fit_cost_model(ag, 0);
  cost.ag_a_us = std::max(0.0, agf.model.a_us);
  cost.ag_b_us_per_byte = std::max(0.0, agf.model.b_us_per_byte);
  log += fmt::format("; factor all-gather fit a = {:.1f} us, b = {:.3e} us/B per rank's byte (R^2 {:.3f})",
                     cost.ag_a_us, cost.ag_b_us_per_byte, agf.r2);
  return cost;
}

// Rank 0: each group of the chosen plan with its transport, bytes per rank and predicted time.
void Replanner::log_plan(const mgwfbp::Profile& prof, const mgwfbp::CostModel& cost, const mgwfbp::Plan& plan) const {
  spdlog::info("plan ({}): {}", cfg_.planner, mgwfbp::describe(plan, prof));
  for (size_t g = 0; g < plan.size(); ++g)
    spdlog::info("  group {}: layers {}-{} {:<22} {:>12} bytes sent per rank, predicted {:>9.0f} us", g,
                 net_.param_label(plan[g].hi), net_.param_label(plan[g].lo),
                 plan[g].sf ? "as sufficient factors" : "dense all-reduce",
                 mgwfbp::group_bytes_sent(prof, cost, plan[g], t_.size()), mgwfbp::group_time_us(prof, cost, plan[g]));
}

void Replanner::replan(bool again) {
  const mgwfbp::Profile prof = measured_profile();
  std::string fits;
  mgwfbp::CostModel cost = fit_costs(prof, fits);
  mgwfbp::Plan chosen;
  if (t_.rank() == 0) {
    chosen = mgwfbp::make_plan(cfg_.planner, prof, cost);
    spdlog::info("{}profile: t_f {:.0f} us, t_b {:.0f} us over {} param layers; {}", again ? "re-" : "",
                 prof.forward_us, prof.backward_us(), net_.param_layers(), fits);
    predictions_ = mgwfbp::predict(prof, mgwfbp::planner_names(prof), {t_.size()}, [&](int) { return cost; });
    for (const auto& pr : predictions_)
      spdlog::info("  planner {:<14} {:>3} groups, predicted iteration {:>9.0f} us, non-overlapped comm {:>8.0f} us",
                   pr.planner, pr.groups, pr.iteration_us, pr.non_overlapped_us);
    log_plan(prof, cost, chosen);
  }
  const Bytes enc = t_.rank() == 0 ? encode_plan(chosen, cost) : Bytes();
  plan_ = decode_plan(comm::broadcast_bytes(t_, 0, enc), cost, net_.param_layers(), factor_layers(net_));
  cost.nodes = t_.size();
  cost_ = cost;
  recent_backward_us_.clear();  // the drift baseline is measured under the new plan
  baseline_backward_us_ = 0;
  since_plan_ = 0;
  profile_ = prof;
  predicted_us_ = mgwfbp::simulate(prof, cost, plan_).iteration_us;
}

}  // namespace sfb::cnn
