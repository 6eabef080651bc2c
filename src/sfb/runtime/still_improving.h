#pragma once
// A run that ends at its limit (stop.max_clocks, stop.max_epochs, stop.max_seconds) while its
// objective is still falling, or its test accuracy still rising, ended too early: the 36.67% of
// issue 67 came from such a run with no word said. Rank 0 judges its evaluations after the run.
#include <cstdint>
#include <string>
#include <vector>

#include "sfb/core/config.h"
#include "sfb/core/metrics.h"
#include "sfb/core/stop_reason.h"

namespace sfb::runtime {

// Still improving when, over the last tenth of the run's clocks (measured from the latest
// evaluation at or before 90% of them, scaled to a tenth), the objective fell by more than
// kObjectiveFall of itself and by more than kGainShare of all it fell since the run's first
// evaluation (an objective creeping towards 0 on separable rows falls by a large share of itself
// and a tiny share of the run's gain), or the test accuracy rose by more than kAccuracyRise.
// Needs an evaluation in the second half of the run to compare with.
inline constexpr double kObjectiveFall = 0.01;
inline constexpr double kGainShare = 0.02;
inline constexpr double kAccuracyRise = 0.005;

// The warning (what fell or rose, by how much, and which keys to change), or "" when the run
// stopped for another reason or had levelled off. `stop_reason` as WorkerResult has it;
// `start_clock`: where this run started (a resumed run's checkpoint clock); `gradient`: the model
// takes a step size (optimizer.lr is then worth naming).
std::string still_improving(const StopConfig& stop, StopReason stop_reason, const std::vector<EvalRecord>& evals,
                            int64_t start_clock, bool gradient);

}  // namespace sfb::runtime
