#include "sfb/core/class_report.h"

#include <cmath>

#include <gtest/gtest.h>

namespace sfb {
namespace {

// Five rows of three classes worked out by hand (the 4th is a tie: the lower class wins, as
// liblinear's argmax), then a row of a label the model does not know.
//   truth  probabilities     predicted
//   0      .7 .2 .1          0
//   0      .2 .5 .3          1
//   1      .1 .8 .1          1
//   2      .4 .4 .2          0
//   2      .1 .3 .6          2
TEST(ClassReport, HandComputedCase) {
  ClassReport r(3);
  const float p[5][3] = {{.7f, .2f, .1f}, {.2f, .5f, .3f}, {.1f, .8f, .1f}, {.4f, .4f, .2f}, {.1f, .3f, .6f}};
  const int32_t truth[5] = {0, 0, 1, 2, 2};
  for (int i = 0; i < 5; ++i) r.add(truth[i], p[i]);
  EXPECT_DOUBLE_EQ(r.accuracy(), 0.6);
  // -(ln .7 + ln .2 + ln .8 + ln .2 + ln .6) / 5 = 0.86190...
  EXPECT_NEAR(r.log_loss(), 0.8619042, 1e-6);
  EXPECT_EQ(r.count(0, 0), 1);
  EXPECT_EQ(r.count(0, 1), 1);
  EXPECT_EQ(r.count(2, 0), 1);
  EXPECT_EQ(r.count(2, 1), 0);
  EXPECT_DOUBLE_EQ(r.precision(0), 0.5);  // predicted 0: rows 1 and 4, one right
  EXPECT_DOUBLE_EQ(r.precision(2), 1.0);
  EXPECT_DOUBLE_EQ(r.recall(1), 1.0);
  EXPECT_DOUBLE_EQ(r.recall(2), 0.5);
  EXPECT_NEAR(r.f1(1), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(r.macro_f1(), (0.5 + 2.0 / 3.0 + 2.0 / 3.0) / 3.0, 1e-12);
  EXPECT_EQ(r.confusion_csv({-1, 5, 9}), "true\\predicted,-1,5,9\n-1,1,1,0\n5,0,1,0\n9,1,0,1\n");
  // An unknown label counts wrong, and is left out of the log-loss and the matrix.
  const float q[3] = {.9f, .05f, .05f};
  r.add(-1, q);
  EXPECT_DOUBLE_EQ(r.accuracy(), 0.5);
  EXPECT_NEAR(r.log_loss(), 0.8619042, 1e-6);
  EXPECT_EQ(r.unknown_rows(), 1);
  EXPECT_EQ(r.rows(), 6);
}

TEST(ClassReport, ClassesNeverSeenScoreZero) {
  ClassReport r(2);
  const float p[2] = {.9f, .1f};
  r.add(0, p);
  EXPECT_DOUBLE_EQ(r.precision(1), 0.0);
  EXPECT_DOUBLE_EQ(r.recall(1), 0.0);
  EXPECT_DOUBLE_EQ(r.f1(1), 0.0);
  EXPECT_DOUBLE_EQ(r.macro_f1(), 0.5);
}

}  // namespace
}  // namespace sfb
