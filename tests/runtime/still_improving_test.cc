#include "sfb/runtime/still_improving.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sfb::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Evaluations every 100 clocks of a 1000-clock run whose objective is obj(clock), accuracy acc(clock).
template <class F, class G>
std::vector<EvalRecord> run_of(F obj, G acc, int64_t start = 0, int64_t end = 1000) {
  std::vector<EvalRecord> evals;
  for (int64_t c = start; c <= end; c += 100) {
    EvalRecord r;
    r.clock = c;
    r.objective = obj(c);
    r.accuracy = acc(c);
    evals.push_back(r);
  }
  return evals;
}

TEST(StillImproving, AFallingObjectiveAtTheLimitWarnsNamingTheKey) {
  StopConfig stop;
  stop.max_epochs = 5;
  // 1.0 at clock 900, 0.9 at 1000: 11% of the final objective in the last tenth.
  const auto evals = run_of([](int64_t c) { return 10.0 - 0.001 * c; }, [](int64_t) { return -1.0; });
  const auto w = still_improving(stop, StopReason::kMaxClocks, evals, 0, true);
  EXPECT_THAT(w, HasSubstr("stopped at its limit (max_clocks) while still improving"));
  EXPECT_THAT(w, HasSubstr("fell 1.1%"));  // (9.1 - 9.0) / 9.0
  EXPECT_THAT(w, HasSubstr("raise stop.max_epochs (to 10)"));
  EXPECT_THAT(w, HasSubstr("optimizer.lr"));
  EXPECT_THAT(still_improving(stop, StopReason::kMaxClocks, evals, 0, false), Not(HasSubstr("optimizer.lr")));
  stop.max_epochs = 0;
  EXPECT_THAT(still_improving(stop, StopReason::kMaxClocks, evals, 0, false),
              HasSubstr("raise stop.max_clocks (to 2000)"));
}

TEST(StillImproving, RisingAccuracyAloneWarns) {
  const auto evals = run_of([](int64_t) { return 0.5; }, [](int64_t c) { return 0.5 + 0.0001 * c; });
  EXPECT_THAT(still_improving(StopConfig{}, StopReason::kMaxClocks, evals, 0, true),
              HasSubstr("test accuracy rose 1 points"));
}

TEST(StillImproving, LevelledOffOrOtherStopsSayNothing) {
  // 0.2% of the objective in the last tenth, accuracy flat.
  const auto flat = run_of([](int64_t c) { return 1.0 - 0.00002 * c; }, [](int64_t) { return 0.8; });
  EXPECT_EQ(still_improving(StopConfig{}, StopReason::kMaxClocks, flat, 0, true), "");
  const auto falling = run_of([](int64_t c) { return 10.0 - 0.001 * c; }, [](int64_t) { return -1.0; });
  EXPECT_EQ(still_improving(StopConfig{}, StopReason::kConverged, falling, 0, true), "");
  EXPECT_EQ(still_improving(StopConfig{}, StopReason::kTargetAccuracy, falling, 0, true), "");
  // Separable rows: the objective creeps towards 0, 11% of itself in the last tenth but 0.1% of
  // the run's fall from 1.0; accuracy flat at 100%.
  const auto separable = run_of([](int64_t c) { return 1.0 / (1.0 + c / 10.0); }, [](int64_t) { return 1.0; });
  EXPECT_EQ(still_improving(StopConfig{}, StopReason::kMaxClocks, separable, 0, true), "");
  // Only the start and the end evaluated: nothing in the second half to compare with.
  EXPECT_EQ(still_improving(StopConfig{}, StopReason::kMaxClocks, {falling.front(), falling.back()}, 0, true), "");
}

TEST(StillImproving, AResumedRunIsJudgedOnItsOwnClocks) {
  // Resumed at clock 1000, ran to 2000; the objective fell only before the resume.
  const auto evals =
      run_of([](int64_t c) { return c < 1000 ? 5.0 - 0.004 * c : 1.0; }, [](int64_t) { return -1.0; }, 1000, 2000);
  EXPECT_EQ(still_improving(StopConfig{}, StopReason::kMaxClocks, evals, 1000, true), "");
  EXPECT_THAT(
      still_improving(StopConfig{}, StopReason::kMaxSeconds,
                      run_of([](int64_t c) { return 3.0 - 0.001 * c; }, [](int64_t) { return -1.0; }, 1000, 2000), 1000,
                      true),
      HasSubstr("raise stop.max_seconds"));
}

}  // namespace
}  // namespace sfb::runtime
