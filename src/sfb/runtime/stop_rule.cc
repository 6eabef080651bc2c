#include "sfb/runtime/stop_rule.h"

#include <cmath>

#include <spdlog/spdlog.h>

namespace sfb::runtime {

bool StopRule::diverged(const EvalRecord& r, const std::vector<EvalRecord>& records) const {
  if (!std::isfinite(r.objective)) return true;
  if (stop_.divergence_factor <= 0 || records.empty()) return false;
  const double start = records.front().objective;
  return std::isfinite(start) && start > 0 && r.objective > stop_.divergence_factor * start;
}

std::optional<StopReason> StopRule::decide(const std::vector<EvalRecord>& records) {
  if (records.empty()) return std::nullopt;
  const EvalRecord& r = records.back();
  const double prev = records.size() >= 2 ? records[records.size() - 2].objective : NAN;
  if (diverged(r, records)) {
    spdlog::error(
        "the objective diverged at clock {}: {} (started at {}; stop.divergence_factor {}); no checkpoint or "
        "model with these weights is written",
        r.clock, r.objective, records.front().objective, stop_.divergence_factor);
    return StopReason::kDiverged;
  }
  if (stop_.max_replica_drift > 0 && r.replica_drift_clock >= 0 && r.replica_drift > stop_.max_replica_drift) {
    spdlog::error(
        "replica drift {:.3g} at clock {} exceeds stop.max_replica_drift {}: the workers' replicas of W have gone "
        "separate ways (partial broadcast on partitions that differ, or SSP/ASP far behind); no model with these "
        "weights is written",
        r.replica_drift, r.replica_drift_clock, stop_.max_replica_drift);
    return StopReason::kReplicaDrift;
  }
  if (stop_.target_accuracy > 0 && r.accuracy >= stop_.target_accuracy) return StopReason::kTargetAccuracy;
  if (stop_.target_objective > 0 && r.objective <= stop_.target_objective) return StopReason::kTargetObjective;
  if (stop_.gap_tol > 0)
    for (const auto& [key, gap] : r.extra)
      if (key == "duality_gap" && std::isfinite(gap) && gap <= stop_.gap_tol * std::abs(r.objective)) {
        spdlog::info(
            "converged at clock {}: the duality gap {:.4g} is within stop.gap_tol = {} of the objective {:.6g}",
            r.clock, gap, stop_.gap_tol, r.objective);
        return StopReason::kConverged;
      }
  if (stop_.rel_tol > 0 && std::isfinite(prev)) {
    const double rel = std::abs(prev - r.objective) / std::max(std::abs(prev), 1e-12);
    below_tol_ = rel < stop_.rel_tol ? below_tol_ + 1 : 0;
    if (below_tol_ >= stop_.patience) return StopReason::kConverged;
  }
  return std::nullopt;
}

}  // namespace sfb::runtime
