#include "sfb/runtime/still_improving.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace sfb::runtime {

namespace {

// The key that set the limit the run stopped at, and a value that gives it twice the room.
std::string what_to_raise(const StopConfig& stop, StopReason reason) {
  if (reason == StopReason::kMaxSeconds) return fmt::format("stop.max_seconds (to {:g})", 2 * stop.max_seconds);
  if (stop.max_epochs > 0) return fmt::format("stop.max_epochs (to {:g})", 2 * stop.max_epochs);
  return fmt::format("stop.max_clocks (to {})", 2 * stop.max_clocks);
}

// The latest evaluation at or before 90% of the run, if it is in the second half and before the end.
const EvalRecord* reference(const std::vector<EvalRecord>& evals, int64_t start_clock) {
  const EvalRecord& end = evals.back();
  const double span = static_cast<double>(end.clock - start_clock);
  const EvalRecord* ref = nullptr;
  for (const auto& r : evals)
    if (static_cast<double>(r.clock - start_clock) <= 0.9 * span) ref = &r;
  if (!ref || static_cast<double>(ref->clock - start_clock) < 0.5 * span || ref->clock >= end.clock) return nullptr;
  return ref;
}

}  // namespace

std::string still_improving(const StopConfig& stop, StopReason stop_reason, const std::vector<EvalRecord>& evals,
                            int64_t start_clock, bool gradient) {
  if (!is_budget(stop_reason)) return "";
  if (evals.size() < 2 || evals.back().clock <= start_clock) return "";
  const EvalRecord* ref = reference(evals, start_clock);
  if (!ref) return "";
  const EvalRecord& end = evals.back();
  const double span = static_cast<double>(end.clock - start_clock);
  const double tenths = static_cast<double>(end.clock - ref->clock) / (0.1 * span);
  const double drop = (ref->objective - end.objective) / tenths;  // per tenth of the run
  const double fall = drop / std::max(std::abs(end.objective), 1e-12);
  const double gain = evals.front().objective - end.objective;
  const bool falling = std::isfinite(fall) && fall > kObjectiveFall && drop > kGainShare * gain;
  const bool accuracy = ref->accuracy >= 0 && end.accuracy >= 0;
  const double rise = accuracy ? (end.accuracy - ref->accuracy) / tenths : 0.0;
  if (!falling && rise <= kAccuracyRise) return "";
  const double share = gain > 0 ? 100 * drop / gain : 0.0;
  std::string what =
      fmt::format("over its last tenth the objective {} {:.2g}%", drop >= 0 ? "fell" : "rose", 100 * std::abs(fall));
  what += fmt::format(" ({:.5g} at clock {}, {:.5g} at {}; ", ref->objective, ref->clock, end.objective, end.clock);
  what += fmt::format("{:.2g}% of its fall since clock {})", share, evals.front().clock);
  if (accuracy && rise != 0)
    what += fmt::format(", test accuracy {} {:.2g} points ({:.2f}% to {:.2f}%)", rise > 0 ? "rose" : "fell",
                        100 * std::abs(rise), 100 * ref->accuracy, 100 * end.accuracy);
  return fmt::format(
      "the run stopped at its limit ({}) while still improving: {}. It has not converged: raise {}{}, or set "
      "stop.rel_tol to stop when the objective levels off",
      to_string(stop_reason), what, what_to_raise(stop, stop_reason),
      gradient ? "; or a larger step (optimizer.lr = \"auto\" searches it)" : "");
}

}  // namespace sfb::runtime
