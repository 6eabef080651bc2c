// The replica-drift sketch (runtime/replica_drift.h): exactly 0 for identical replicas, an
// unbiased estimate of the relative spread otherwise, and a collector that completes a clock only
// when every worker's sketch is in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sfb/core/error.h"
#include "sfb/core/rng.h"
#include "sfb/runtime/replica_drift.h"

namespace sfb::runtime {
namespace {

Matrix random_matrix(int64_t r, int64_t c, uint64_t seed) {
  Rng rng = make_rng(seed, 3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = n(rng);
  return m;
}

TEST(ReplicaDrift, IdenticalReplicasGiveExactlyZero) {
  DriftSketcher sk(30, 50, 7);
  const Matrix W = random_matrix(30, 50, 1);
  const auto s = sk.sketch(W, 0.37f);
  EXPECT_EQ(replica_drift({s, s, s, s, s, s, s}), 0.0);
  EXPECT_EQ(replica_drift({sk.sketch(Matrix::Zero(30, 50), 1.0f)}), 0.0);
}

TEST(ReplicaDrift, EstimatesTheRelativeDistanceFromTheMean) {
  // Four replicas W + e_p with sum_p e_p = 0: the exact answer is sqrt(mean ||e_p||^2) / ||W||.
  const Matrix W = random_matrix(40, 60, 2);
  std::vector<Matrix> e;
  for (int p = 0; p < 3; ++p) e.push_back(0.1f * random_matrix(40, 60, 10 + p));
  e.push_back(-(e[0] + e[1] + e[2]));
  double spread = 0;
  for (const auto& x : e) spread += x.squaredNorm();
  const double exact = std::sqrt(spread / 4) / W.norm();
  DriftSketcher sk(40, 60, 9, 512);  // many projections: a tight estimate
  std::vector<std::vector<double>> s;
  for (const auto& x : e) s.push_back(sk.sketch(W + x, 1.0f));
  EXPECT_NEAR(replica_drift(s), exact, 0.15 * exact);
  // The scale multiplies W (the worker's w_scale): relative drift does not change.
  std::vector<std::vector<double>> scaled;
  for (const auto& x : e) scaled.push_back(sk.sketch(W + x, 4.0f));
  EXPECT_NEAR(replica_drift(scaled), replica_drift(s), 1e-6 * exact);
}

TEST(ReplicaDrift, CollectorCompletesAClockWhenEveryWorkerReported) {
  DriftCollector c(3);
  EXPECT_FALSE(c.add(10, 0, {1.0, 2.0}));
  EXPECT_FALSE(c.add(20, 0, {1.0, 2.0}));
  EXPECT_FALSE(c.add(10, 2, {1.0, 2.0}));
  EXPECT_THROW(c.add(10, 2, {1.0, 2.0}), CommError);  // twice from one rank
  EXPECT_THROW(c.add(10, 1, {1.0}), CommError);       // another size
  const auto d = c.add(10, 1, {1.0, 2.0});
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, 0.0);
  EXPECT_FALSE(c.add(20, 1, {1.0, 2.0}));
  const auto d2 = c.add(20, 2, {3.0, 2.0});
  ASSERT_TRUE(d2);
  EXPECT_GT(*d2, 0.0);
}

}  // namespace
}  // namespace sfb::runtime
