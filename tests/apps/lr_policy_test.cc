#include "sfbd/lr_policy.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "sfb/io/dataset.h"

namespace sfb {
namespace {

// A trial whose objective is (log10 lr - log10 best)^2: the search must land on `best` (a point of
// its half-decade grid) from either side of the first candidate, 0.1.
// (A model without an accuracy: the objective decides.)
LrScore bowl(double lr, double best) { return {-1, std::pow(std::log10(lr) - std::log10(best), 2)}; }

TEST(LrSearch, WalksDownhillByDecadesThenRefinesByHalfDecades) {
  for (const double best : {1e-4, 3.16227766e-3, 0.1, 0.316227766, 100.0, 1e4}) {
    int calls = 0;
    const auto r = search_lr([&](double lr) {
      ++calls;
      return bowl(lr, best);
    });
    EXPECT_NEAR(std::log10(r.chosen), std::log10(best), 1e-6) << best;
    EXPECT_EQ(static_cast<int>(r.tried.size()), calls) << "each rate is tried once";
    EXPECT_LE(calls, 12) << best;
  }
  // From 0.1 up to 100: 0.1, 1, 10, 100, 1000 (worse: stop), then 31.6 and 316.
  const auto r = search_lr([](double lr) { return bowl(lr, 100.0); });
  ASSERT_EQ(r.tried.size(), 7u);
  EXPECT_DOUBLE_EQ(r.tried[0].lr, 0.1);
  EXPECT_DOUBLE_EQ(r.tried[1].lr, 1.0);
  EXPECT_NEAR(r.tried[4].lr, 1000.0, 1e-9);
}

TEST(LrSearch, ADivergedTrialLosesAndNeverWins) {
  // Every rate above 0.5 diverges (NaN, inf): the best finite one is chosen.
  // A diverged trial's weights may still classify (all one class): its accuracy does not count.
  const auto r = search_lr([](double lr) {
    if (lr > 0.5)
      return LrScore{0.99, lr > 5 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity()};
    return LrScore{lr, 1.0 / lr};
  });
  EXPECT_NEAR(r.chosen, 0.316227766, 1e-6);
  for (const auto& t : r.tried)
    if (t.lr > 0.5) EXPECT_TRUE(std::isinf(t.score.objective));
  // Nothing finite at all: the search reports +inf (the caller refuses to train).
  const auto none = search_lr([](double) { return LrScore{-1, std::numeric_limits<double>::quiet_NaN()}; });
  EXPECT_TRUE(std::isinf(none.score.objective));
}

TEST(LrSearch, HeldOutAccuracyDecidesAndTheObjectiveBreaksTies) {
  // The objective keeps falling up to 100 (a rate that memorises), the accuracy peaks at 1.
  const auto r = search_lr([](double lr) {
    const double d = std::abs(std::log10(lr));
    return LrScore{0.8 - 0.1 * d, 1.0 / (1 + lr)};
  });
  EXPECT_DOUBLE_EQ(r.chosen, 1.0);
  EXPECT_TRUE(better({0.5, 2.0}, {0.4, 1.0}));
  EXPECT_TRUE(better({0.5, 1.0}, {0.5, 2.0})) << "a tie in accuracy: the lower objective";
  EXPECT_TRUE(better({-1, 1.0}, {-1, 2.0}));
  EXPECT_TRUE(better({0.1, 3.0}, {0.9, std::numeric_limits<double>::infinity()})) << "finite beats diverged";
}

TEST(LrSearch, TrialLengthIsHalfTheRunWithinItsBoundsOrTheKey) {
  OptimizerConfig o;
  EXPECT_EQ(lr_trial_clocks(o, 586), 293);
  EXPECT_EQ(lr_trial_clocks(o, 12000), 1000);
  EXPECT_EQ(lr_trial_clocks(o, 1500), 750);
  EXPECT_EQ(lr_trial_clocks(o, 40), 30);
  EXPECT_EQ(lr_trial_clocks(o, 10), 10) << "never longer than the run";
  o.lr_search_clocks = 77;
  EXPECT_EQ(lr_trial_clocks(o, 12000), 77);
}

TEST(LrSearch, ATrialWalksTheRunsWholeDecayScheduleInItsClocks) {
  OptimizerConfig run;
  run.lr = 0.5;
  run.lr_decay = 0.001;
  run.lr_auto = true;
  // The run: clocks 1000 .. 4000 (resumed at 1000); the trial: 100 clocks from 1000.
  const auto t = lr_trial_optimizer(run, 0.2, 1000, 3000, 100);
  EXPECT_FALSE(t.lr_auto);
  EXPECT_DOUBLE_EQ(t.lr, 0.2);
  EXPECT_DOUBLE_EQ(t.step(1000), 0.2 / (1 + 0.001 * 1000)) << "starts at the run's step at its start";
  EXPECT_NEAR(t.step(1100), 0.2 / (1 + 0.001 * 4000), 1e-12) << "ends at the run's last step";
  EXPECT_NEAR(t.step(1050), 0.2 / (1 + 0.001 * 2500), 1e-12);
  EXPECT_DOUBLE_EQ(run.step(4000), 0.5 / 5.0) << "the run's own schedule is untouched";
}

TEST(DatasetRowRange, CopiesDenseAndSparseRowsWithTheirLabels) {
  io::Dataset d;
  d.name = "d";
  d.n = 5;
  d.dim = 3;
  d.classes = 4;
  d.dense = Matrix::Random(5, 3);
  d.labels = {0, 1, 2, 3, 0};
  const auto tail = d.row_range(3, 5, "tail");
  EXPECT_EQ(tail.n, 2);
  EXPECT_EQ(tail.name, "tail");
  EXPECT_TRUE(tail.dense.isApprox(d.dense.bottomRows(2)));
  EXPECT_EQ(tail.labels, (std::vector<int32_t>{3, 0}));
  io::Dataset s = d;
  s.sparse = true;
  s.csr = d.dense.sparseView();
  s.dense = Matrix();
  const auto st = s.row_range(1, 4, "mid");
  EXPECT_EQ(st.csr.rows(), 3);
  EXPECT_TRUE(Matrix(st.csr.toDense()).isApprox(d.dense.middleRows(1, 3)));
  EXPECT_EQ(st.labels, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_THROW(d.row_range(4, 6, "x"), std::exception);
}

}  // namespace
}  // namespace sfb
