#pragma once
// Why a run stopped: one word of a fixed vocabulary, the same in summary.json ("stop_reason"), the
// logs and every engine (SFB and the baselines, the sharded engine, the CNN executor). The detail
// (which rank received which signal) travels beside it as text for people (summary.json's
// "stop_detail"), never as part of the word a tool compares.
#include <string_view>

namespace sfb {

enum class StopReason {
  kMaxClocks,        // stop.max_clocks (or stop.max_epochs, turned into clocks)
  kMaxSeconds,       // stop.max_seconds
  kTargetAccuracy,   // stop.target_accuracy reached
  kTargetObjective,  // stop.target_objective reached
  kConverged,        // relative change below stop.rel_tol for stop.patience evaluations
  kSignal,           // SIGINT / SIGTERM on some rank: a final checkpoint and model are written
  kDiverged,         // the objective is not finite or grew past stop.divergence_factor
  kReplicaDrift,     // the replicas drifted apart past stop.max_replica_drift
  kError,            // a thread failed
};

// The summary.json word: "max_clocks", "max_seconds", "target_accuracy", "target_objective",
// "converged", "signal", "diverged", "replica_drift", "error".
std::string_view to_string(StopReason r);

// The run ended because its weights are bad (diverged, replicas apart; this outranks a budget that
// ran out first) or a thread failed: no model or checkpoint of those weights is written, and the
// exit status says so.
constexpr bool is_failure(StopReason r) {
  return r == StopReason::kDiverged || r == StopReason::kReplicaDrift || r == StopReason::kError;
}

// The run used up its budget (clocks or seconds) rather than meeting a goal.
constexpr bool is_budget(StopReason r) { return r == StopReason::kMaxClocks || r == StopReason::kMaxSeconds; }

}  // namespace sfb
