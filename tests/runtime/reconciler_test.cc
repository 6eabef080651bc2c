// Partial broadcast's reconciliation (runtime/reconciler.h): every worker ends on the same
// consensus, bitwise; "mean" is the replicas' mean, "sum" counts every update exactly once when
// each reached Q + 1 replicas; the drift it reports is the replicas' measured spread.
#include "sfb/runtime/reconciler.h"

#include <cmath>

#include <gtest/gtest.h>

#include "sfb/comm/channel.h"
#include "sfb/core/rng.h"
#include "testing/rank_threads.h"

namespace sfb::runtime {
namespace {

Matrix random_matrix(uint64_t seed, int rows, int cols) {
  Rng rng = make_rng(seed, 0);
  std::normal_distribution<float> g(0, 1);
  Matrix m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = g(rng);
  return m;
}

// P workers; worker p's update U_p reaches p and its Q = 2 successors (p + 1, p + 2 mod P).
struct Replicas {
  int P = 5, Q = 2;
  Matrix base = random_matrix(1, 3, 4);
  std::vector<Matrix> updates, replicas;
  Replicas() {
    for (int p = 0; p < P; ++p) updates.push_back(random_matrix(10 + static_cast<uint64_t>(p), 3, 4));
    for (int q = 0; q < P; ++q) {
      Matrix w = base;
      for (int p = 0; p < P; ++p) {
        const int d = (q - p + P) % P;
        if (d <= Q) w += updates[static_cast<size_t>(p)];
      }
      replicas.push_back(w);
    }
  }
  // Runs one reconciliation on every worker; returns the results and the drifts.
  std::vector<Matrix> run(Reconciler::Mode mode, std::vector<double>& drift) {
    std::vector<Matrix> out = replicas;
    drift.assign(static_cast<size_t>(P), 0.0);
    testing::run_ranks_on("inproc", P, [&](comm::Transport& t) {
      comm::TransportChannel ch(t, comm::kTagReconcile);
      Reconciler r(ch, P, Q + 1, mode, 4, 0, base);
      EXPECT_FALSE(r.due(3));
      EXPECT_TRUE(r.due(4));
      EXPECT_EQ(r.next_boundary(), 4);
      drift[static_cast<size_t>(t.rank())] = r.reconcile(out[static_cast<size_t>(t.rank())], 4);
      EXPECT_EQ(r.last(), 4);
      EXPECT_FALSE(r.due(4));
      EXPECT_EQ(r.next_boundary(), 8);
    });
    return out;
  }
};

TEST(Reconciler, MeanIsTheReplicasMeanOnEveryWorkerBitwise) {
  Replicas rep;
  std::vector<double> drift;
  const auto out = rep.run(Reconciler::Mode::kMean, drift);
  Matrix mean = Matrix::Zero(3, 4);
  for (const auto& w : rep.replicas) mean += w;
  mean /= static_cast<float>(rep.P);
  for (int p = 0; p < rep.P; ++p) {
    EXPECT_EQ(out[static_cast<size_t>(p)], out[0]) << "worker " << p << " has another consensus";
    EXPECT_LT((out[static_cast<size_t>(p)] - mean).norm(), 1e-5f * mean.norm());
  }
  // The drift is the replicas' spread around their mean, relative to it.
  double spread = 0;
  for (const auto& w : rep.replicas) spread += static_cast<double>((w - mean).squaredNorm());
  const double want = std::sqrt(spread / rep.P) / static_cast<double>(mean.norm());
  for (double d : drift) EXPECT_NEAR(d, want, 1e-4 * want);
  EXPECT_GT(want, 0.1);
}

TEST(Reconciler, SumCountsEveryUpdateOnce) {
  Replicas rep;
  std::vector<double> drift;
  const auto out = rep.run(Reconciler::Mode::kSum, drift);
  Matrix full = rep.base;  // what full broadcast applies: every update on every replica
  for (const auto& u : rep.updates) full += u;
  for (int p = 0; p < rep.P; ++p) {
    EXPECT_EQ(out[static_cast<size_t>(p)], out[0]);
    EXPECT_LT((out[static_cast<size_t>(p)] - full).norm(), 1e-4f * full.norm()) << "worker " << p;
  }
}

TEST(Reconciler, AutoPeriodKeepsTheAllReduceNearItsShareOfTheFactorBytes) {
  // P = 8, Q = 3, K = 32, J = 10, D = 785 dense: 2 * 7/8 * 7850 floats per R clocks against
  // 3 * 32 * 795 a clock; 10% of that is 7632, so R = ceil(13737.5 / 7632) = 2.
  EXPECT_EQ(auto_reconcile_every(8, 3, 32, 10, 785, 785), 2);
  // Sparse v sends fewer factor floats: the period grows.
  EXPECT_GT(auto_reconcile_every(8, 3, 32, 10, 785, 100), 2);
  EXPECT_EQ(auto_reconcile_every(1, 0, 32, 10, 785, 785), 0);
}

}  // namespace
}  // namespace sfb::runtime
