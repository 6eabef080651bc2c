#pragma once
// Profiling and planning in the CNN executor. The first mgwfbp.profile_iters iterations run as
// SyncEASGD (one dense group) while their forward time and per-layer backward times are recorded
// (parameterless layers folded into the param layer that owns their time). Then, between two
// iterations, every rank times all-reduces of growing size on the live transport and, when the
// network has fully connected layers, sufficient-factor all-gathers of growing size and each such
// layer's gradient rebuild (t_sf); rank 0 builds the profile, fits T(M) = a + b M for both
// transports, plans with mgwfbp.planner (the hybrid planners choose each group's transport),
// logs every planner's prediction and the chosen plan's groups (transport, bytes per rank), and
// broadcasts cost and plan; everyone adopts them. With mgwfbp.replan_threshold > 0, every
// mgwfbp.replan_every iterations rank 0 checks the median backward time of the last 50
// iterations against the median of the first 20 under the current plan (not the profile: layers
// sent as factors skip their weight gradients, so a hybrid plan's backward is shorter by
// design), and all ranks re-time the communication and re-plan when it drifted by more than that
// fraction (the layer times stay those of the first profile).
//
// Threads: the training thread; the collective steps need the gradient-communication thread idle.
#include <cstdint>
#include <string>
#include <vector>

#include "sfb/cnn/call_ids.h"
#include "sfb/cnn/cnn_file.h"
#include "sfb/cnn/grad_comm.h"
#include "sfb/cnn/network.h"
#include "sfb/comm/allreduce.h"
#include "sfb/comm/sf_allgather.h"
#include "sfb/core/config.h"
#include "sfb/mgwfbp/planner.h"
#include "sfb/mgwfbp/simulator.h"

namespace sfb::cnn {

// Throws InvalidArgument naming mgwfbp.planner when it is not a planner's name.
void check_planner(const MgwfbpConfig& cfg);

class Replanner {
 public:
  // `batch`: samples per rank and iteration (the factors' rows); `fixed`: use this plan for every
  // iteration, without profiling (tests).
  // The timing probes run collectives of the planner's own (kTagProbe, kTagProbeSf; `allreduce`
  // makes the all-reduce engine the dense groups use, so its cost is what gets fitted).
  Replanner(const MgwfbpConfig& cfg, comm::Transport& t, Network& net, int64_t batch,
            const mgwfbp::Plan* fixed = nullptr, const comm::AllreduceFactory& allreduce = {});

  // Before the first iteration `it` of a resumed run: with `restored` (a checkpoint of this many
  // ranks) its plan, cost and profile are adopted and nothing is profiled; without, the
  // mgwfbp.profile_iters iterations from `it` on are profiled (the cluster may be another one).
  void resume_at(int64_t it, const PlanState* restored);
  // Collective: called before iteration `it` on every rank; (re)plans when it is time. True when
  // it did.
  bool before_iteration(int64_t it);
  // After iteration `it`: its measured forward time and per-layer backward times.
  void record(int64_t it, double forward_us, const std::vector<double>& layer_us, double backward_us);
  bool profiling(int64_t it) const { return it >= profile_begin_ && it < profile_end_; }

  const mgwfbp::Plan& plan() const { return plan_; }
  const mgwfbp::CostModel& cost() const { return cost_; }
  // The broadcast fit as the link cost the dense groups' all-reduce chooses its algorithm by (the
  // same on every rank; the engine's default until the first plan), for the communicator with
  // the plan.
  comm::LinkCost link_cost() const { return link_cost_from_fit(cost_.a_us, cost_.b_us_per_byte, t_.size()); }
  const mgwfbp::Profile& profile() const { return profile_; }
  // Every planner's prediction for the measured profile and cost (rank 0).
  const std::vector<mgwfbp::Prediction>& predictions() const { return predictions_; }
  // The simulator's iteration time for the current plan (0 while profiling).
  double predicted_us() const { return predicted_us_; }
  int replans() const { return replans_; }

 private:
  void replan(bool again);
  mgwfbp::Profile measured_profile() const;
  std::vector<mgwfbp::Sample> time_allreduces();
  std::vector<mgwfbp::Sample> time_allgathers(int64_t max_bytes);
  mgwfbp::CostModel fit_costs(const mgwfbp::Profile& prof, std::string& log);
  void log_plan(const mgwfbp::Profile& prof, const mgwfbp::CostModel& cost, const mgwfbp::Plan& plan) const;
  bool drifted() const;

  const MgwfbpConfig cfg_;
  comm::Transport& t_;
  Network& net_;
  comm::TransportChannel probe_ch_, probe_sf_ch_;
  std::unique_ptr<comm::Allreduce> allreduce_;
  comm::SfAllgather allgather_;
  const int64_t batch_;
  const bool fixed_;
  int64_t profile_begin_ = 0, profile_end_;  // the profiled iterations [begin, end)
  mgwfbp::Plan plan_;
  mgwfbp::CostModel cost_;
  mgwfbp::Profile profile_;
  std::vector<mgwfbp::Prediction> predictions_;
  double predicted_us_ = 0;
  int replans_ = 0;
  std::vector<std::vector<double>> prof_layer_us_;  // profiling iterations: per layer
  std::vector<double> prof_forward_us_, recent_backward_us_;
  double baseline_backward_us_ = 0;  // median of the first 20 iterations under the plan (0: not yet)
  int64_t since_plan_ = 0;
  int64_t probe_id_ = kFirstProbeCallId;  // the next timing probe's call id (call_ids.h)
};

}  // namespace sfb::cnn
