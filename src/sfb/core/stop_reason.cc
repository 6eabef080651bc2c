#include "sfb/core/stop_reason.h"

namespace sfb {

std::string_view to_string(StopReason r) {
  switch (r) {
    case StopReason::kMaxClocks: return "max_clocks";
    case StopReason::kMaxSeconds: return "max_seconds";
    case StopReason::kTargetAccuracy: return "target_accuracy";
    case StopReason::kTargetObjective: return "target_objective";
    case StopReason::kConverged: return "converged";
    case StopReason::kSignal: return "signal";
    case StopReason::kDiverged: return "diverged";
    case StopReason::kReplicaDrift: return "replica_drift";
    case StopReason::kError: return "error";
  }
  return "unknown";
}

}  // namespace sfb
