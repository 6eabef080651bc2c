#pragma once
// The stop rules a run's evaluations are judged by (stop.*): divergence, replica drift, target
// accuracy or objective, and a relative change below stop.rel_tol for stop.patience evaluations in
// a row. One rule for rank 0's objective monitor (SFB and the dense baselines) and for the sharded
// engine, where every rank judges the same reduced evaluations and so stops at the same clock.
#include <optional>
#include <vector>

#include "sfb/core/config.h"
#include "sfb/core/metrics.h"
#include "sfb/core/stop_reason.h"

namespace sfb::runtime {

class StopRule {
 public:
  explicit StopRule(const StopConfig& stop) : stop_(stop) {}
  // After `records`, every evaluation so far with the newest last: why the run stops now
  // (diverged, replica drift, target accuracy or objective, converged: the objective flat by
  // stop.rel_tol, or a model's duality gap within stop.gap_tol of it), or nullopt to go on. Logs an
  // error for the first two. Call it once per new record.
  std::optional<StopReason> decide(const std::vector<EvalRecord>& records);
  // r's objective is not finite, or above stop.divergence_factor times the first record's.
  bool diverged(const EvalRecord& r, const std::vector<EvalRecord>& records) const;

 private:
  const StopConfig stop_;
  int below_tol_ = 0;  // evaluations in a row whose relative change was below stop.rel_tol
};

}  // namespace sfb::runtime
