#pragma once
// MG-WFBP training mode (job.mode = "mgwfbp"): data-parallel S-SGD of a CNN whose layer gradients
// are all-reduced while backward still runs, merged into groups by a planner (the paper's
// Algorithm 2).
//
//  * Training thread: per iteration, its own minibatch; forward; backward, which pushes each
//    param layer's id into the ready queue the moment its gradient is final; waits for every
//    group; SGD with momentum.
//  * Communication thread: follows the plan group by group (backward order): waits until the
//    group's last-ready layer is in the queue, copies the group's gradients into one flat buffer,
//    all-reduces it (rank-order sums: every planner gives bitwise the same weights), divides by P
//    and copies back.
//  * Profiling: the first mgwfbp.profile_iters iterations run as SyncEASGD while rank 0 measures
//    t_f and t_b per layer (parameterless layers folded into the next param layer of the backward
//    pass); then every rank times all-reduces of growing size on the live transport and rank 0
//    fits T(M) = a + b M, plans with mgwfbp.planner, logs every planner's prediction, and
//    broadcasts the plan. With mgwfbp.replan_threshold > 0, rank 0 re-profiles and re-plans when
//    the measured backward time drifts from the profile by more than that fraction.
//  * Accounting per iteration: forward, backward, non-overlapped communication (after backward
//    until the last group is done), iteration, and the simulator's prediction for the plan.
#include <functional>
#include <string>
#include <vector>

#include "sfb/comm/transport.h"
#include "sfb/core/config.h"
#include "sfb/core/metrics.h"
#include "sfb/io/dataset.h"
#include "sfb/mgwfbp/planner.h"
#include "sfb/mgwfbp/simulator.h"

namespace sfb::mgwfbp {

struct ExecutorHooks {
  // Rows of this rank's data for iteration `iter` (default: an epoch sampler per rank).
  std::function<void(int64_t iter, std::vector<int64_t>& rows)> batch;
  // Communication thread, just before group g's all-reduce: ready[p] says whether param layer p
  // has reported its gradient in this iteration.
  std::function<void(int64_t iter, int group, const Group& g, const std::vector<char>& ready)> on_allreduce;
  // Forces a plan instead of profiling and planning (tests).
  const Plan* plan = nullptr;
};

struct IterationStats {
  int64_t iteration = 0;
  double forward_us = 0, backward_us = 0, comm_wait_us = 0, iteration_us = 0, predicted_us = 0;
  double loss = 0;
};

struct ExecutorResult {
  std::vector<float> params;  // every parameter, param layers in forward order
  uint64_t checksum = 0;      // of params
  Plan plan;
  CostModel cost;
  Profile profile;
  std::vector<Prediction> predictions;  // every planner, for the measured profile and cost
  std::vector<IterationStats> iterations;
  double test_accuracy = -1;  // rank 0
  double seconds = 0;
  int64_t bytes_sent = 0;
  int replans = 0;
};

class Executor {
 public:
  Executor(const Config& cfg, comm::Transport& transport, const io::Dataset& train, const io::Dataset* test,
           ExecutorHooks hooks = {});
  ExecutorResult run();

 private:
  const Config& cfg_;
  comm::Transport& t_;
  const io::Dataset& train_;
  const io::Dataset* test_;
  ExecutorHooks hooks_;
};

}  // namespace sfb::mgwfbp
