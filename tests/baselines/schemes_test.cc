// The communication schemes side by side (docs/design.md, invariant 4): under BSP, SFB (full broadcast),
// FMS (1 or 2 parameter servers) and the dense ring all-reduce compute the same W from the same
// samples; Halton partial broadcast sends to exactly its Q out-neighbours; the ring all-reduce and
// the parameter-server wire format on their own.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/baselines/allreduce_exchange.h"
#include "sfb/baselines/dense_update.h"
#include "sfb/baselines/fms_exchange.h"
#include "sfb/baselines/fms_server.h"
#include "sfb/baselines/make_exchange.h"
#include "sfb/baselines/ps_codec.h"
#include "sfb/baselines/scheme_bytes.h"
#include "sfb/comm/transport/latency.h"
#include "sfb/core/error.h"
#include "sfb/core/halton.h"
#include "sfb/core/hash.h"
#include "sfb/core/row_blocks.h"
#include "sfb/io/load_data.h"
#include "sfb/models/registry.h"
#include "sfb/runtime/model_prox.h"
#include "sfb/runtime/sharded_worker.h"
#include "sfb/runtime/study_hooks.h"
#include "sfb/runtime/topology.h"
#include "sfb/runtime/worker.h"
#include "testing/batches.h"
#include "testing/configs.h"
#include "testing/rank_threads.h"

namespace sfb::baselines {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Config small_config() {
  Config c = testing::with_schedule(testing::quiet_synthetic(30, 5, 600, 100), 6, 0.2, 10, 100);
  c.stop.max_clocks = 40;
  c.runtime.peer_timeout_s = 60;  // a hang fails the test instead of waiting the default 10 minutes
  return c;
}

struct SchemeRun {
  std::vector<runtime::WorkerResult> workers;
  std::vector<ServerStats> servers;
};

// P workers (+ fms.servers server ranks for FMS) as threads over the in-process transport; the
// sharded scheme's workers hold their block of W's rows (runtime/sharded_worker.h).
SchemeRun run_scheme(int P, const Config& cfg) {
  const int S = cfg.comm.scheme == sfb::Scheme::kFms ? static_cast<int>(cfg.fms.servers) : 0;
  SchemeRun out;
  out.workers.resize(static_cast<size_t>(P));
  out.servers.resize(static_cast<size_t>(S));
  testing::run_ranks(P + S, [&](comm::Transport& t) {
    const int r = t.rank();
    // A server builds the model on a worker's partition for its proximal step, as sfbd does.
    const int part = r < P ? r : (r - P) % P;
    if (cfg.comm.scheme == sfb::Scheme::kSharded) {
      const auto data = io::load_data(cfg.data, cfg.job.seed, io::LoadRequest{r, P, true, cfg.eval.train_sample});
      auto model = models::make_model(cfg, data.train, data.total_train, r, P);
      runtime::ShardedWorker w(cfg, t, data.train, data.eval_sample, &data.test, *model, {});
      out.workers[static_cast<size_t>(r)] = w.run();
      return;
    }
    const auto data = io::load_data(cfg.data, cfg.job.seed, part, P, r == 0);
    auto model = models::make_model(cfg, data.train, data.total_train, part, P);
    if (r >= P) {
      FmsServer server(cfg.fms, cfg.runtime.peer_timeout_s, t,
                       stored_rows(model->layout(), model->rows(), model->cols()),
                       stored_cols(model->layout(), model->rows(), model->cols()), runtime::model_prox(cfg, *model));
      out.servers[static_cast<size_t>(r - P)] = server.run();
      return;
    }
    auto exchange = make_exchange(cfg, model->has_prox());
    runtime::Worker w(cfg, t, data.train, &data.test, *model, runtime::with_study_hooks(cfg.runtime, r), {},
                      exchange.get());
    out.workers[static_cast<size_t>(r)] = w.run();
  });
  return out;
}

// The scheme of `c` with `servers` FMS server ranks.
Config with_fms(Config c, int servers) {
  c.comm.scheme = sfb::Scheme::kFms;
  c.fms.servers = servers;
  return c;
}

// Runs `cfg` and checks that it computed `ref` (an SFB run's W): every worker at the last clock,
// replicas bitwise equal, within 1e-4 of ref relative to its largest entry (at least 1; across
// schemes only the float summation order differs).
SchemeRun expect_same_w(int P, const Config& cfg, const Matrix& ref, const std::string& label) {
  auto run = run_scheme(P, cfg);
  const float scale = std::max(1.0f, ref.cwiseAbs().maxCoeff());
  for (const auto& w : run.workers) {
    EXPECT_EQ(w.self.checksum, run.workers[0].self.checksum) << label;
    EXPECT_EQ(w.final_clock, cfg.stop.max_clocks) << label;
    EXPECT_LT((w.W() - ref).cwiseAbs().maxCoeff(), 1e-4f * scale) << label;
  }
  return run;
}

// (sparse v, model.layout): every scheme in either layout; FMS shards and the all-reduce blocks
// are the stored matrix's rows (the features under feature-major).
class BspSchemes : public ::testing::TestWithParam<std::tuple<bool, std::string>> {};

TEST_P(BspSchemes, SfbFmsAndAllreduceComputeTheSameW) {
  Config cfg = small_config();
  const auto [sparse, layout] = GetParam();
  if (sparse) cfg.data.synthetic_density = 0.2;  // sparse v on the wire
  cfg.model.layout = layout;
  const int P = 3;
  const auto sfb = run_scheme(P, cfg);
  for (const auto& w : sfb.workers) ASSERT_EQ(w.self.checksum, sfb.workers[0].self.checksum);
  const Matrix& ref = sfb.workers[0].W();
  ASSERT_GT(ref.cwiseAbs().maxCoeff(), 0.01f);
  for (std::string scheme : {"allreduce", "fms1", "fms2"}) {
    Config c = cfg;
    c.comm.scheme = *choice_named<Scheme>(scheme.substr(0, scheme.find_first_of("12")));
    if (scheme == "fms2") c.fms.servers = 2;
    const auto run = expect_same_w(P, c, ref, scheme + " " + layout);
    for (const auto& s : run.servers) EXPECT_EQ(s.clocks, cfg.stop.max_clocks) << scheme;
  }
}

INSTANTIATE_TEST_SUITE_P(DenseAndSparse, BspSchemes,
                         ::testing::Combine(::testing::Values(false, true),
                                            ::testing::Values("row-major", "feature-major")));

// The same BSP run with W kept row-major and feature-major (WorkerResult::W is row-major either
// way). Sparse data: the same bits, for every solver (the sparse update and the sparse logits add
// the same floats in the same order, core/gathered_sum.h). Dense data: the GEMMs have other shapes,
// so within float rounding.
class BothLayouts : public ::testing::TestWithParam<std::string> {};

TEST_P(BothLayouts, TrainTheSameW) {
  for (const bool sparse : {true, false}) {
    Config cfg = small_config();
    const std::string model = GetParam();
    cfg.model.name = model.substr(0, model.find(':'));
    if (model == "l2mlr:sdca") cfg.model.solver = "sdca";
    cfg.model.lambda = 0.01;
    if (sparse) cfg.data.synthetic_density = 0.2;
    const int P = 3;
    cfg.model.layout = "row-major";
    const auto rows = run_scheme(P, cfg);
    cfg.model.layout = "feature-major";
    const auto features = run_scheme(P, cfg);
    const Matrix& ref = rows.workers[0].W();
    ASSERT_GT(ref.cwiseAbs().maxCoeff(), 0.01f) << model;
    for (int r = 0; r < P; ++r) {
      const Matrix& W = features.workers[static_cast<size_t>(r)].W();
      ASSERT_EQ(W.rows(), ref.rows());
      if (sparse) {
        EXPECT_EQ(W, ref) << model << " rank " << r << ": max difference " << (W - ref).cwiseAbs().maxCoeff();
        EXPECT_EQ(features.workers[static_cast<size_t>(r)].self.checksum, rows.workers[0].self.checksum);
      } else {
        EXPECT_LT((W - ref).cwiseAbs().maxCoeff(), 1e-4f * std::max(1.0f, ref.cwiseAbs().maxCoeff())) << model;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BothLayouts, ::testing::Values("mlr", "l2mlr", "l2mlr:sdca"), [](const auto& info) {
  std::string n = info.param;
  std::replace(n.begin(), n.end(), ':', '_');
  return n;
});

TEST(BothLayouts, ModelsThatReadWByRowsRefuseFeatureMajor) {
  for (const std::string name : {"dml", "sparse_coding"}) {
    Config cfg = small_config();
    cfg.model.name = name;
    cfg.model.layout = "feature-major";
    const auto data = io::load_data(cfg.data, cfg.job.seed, 0, 1, true);
    try {
      models::make_model(cfg, data.train, data.total_train, 0, 1);
      FAIL() << name << " accepted model.layout = feature-major";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("model.layout = \"feature-major\"")) << e.what();
      EXPECT_THAT(e.what(), HasSubstr(name));
    }
    cfg.model.layout = "auto";
    cfg.data.synthetic_density = 0.2;
    const auto sparse = io::load_data(cfg.data, cfg.job.seed, 0, 1, true);
    EXPECT_EQ(models::make_model(cfg, sparse.train, sparse.total_train, 0, 1)->layout(), Layout::kRowMajor) << name;
  }
}

// The servers apply the model's proximal step as an SFB worker does after each sender's batch:
// L2-MLR's shrinkage (row-separable) and sparse coding's column projection (spans every server's
// rows: with 2 servers they gather W). Without it FMS would train a different model.
class FmsProx : public ::testing::TestWithParam<std::string> {};

TEST_P(FmsProx, ServersApplyTheProximalStepAsSfbDoes) {
  Config cfg = small_config();
  cfg.model.name = GetParam();
  cfg.model.lambda = 0.05;  // l2mlr: a shrinkage of 1 / (1 + 0.2 * 0.05) per batch, visible in 40 clocks
  cfg.model.atoms = 6;      // sparse_coding: dictionary 30 x 6
  cfg.optimizer.lr = GetParam() == "sparse_coding" ? 0.05 : 0.2;
  const int P = 3;
  const auto sfb = run_scheme(P, cfg);
  const Matrix& ref = sfb.workers[0].W();
  Config no_prox = cfg;  // what FMS computed before its servers applied the prox
  no_prox.model.lambda = 0;
  const auto plain = run_scheme(P, no_prox);
  const float scale = std::max(1.0f, ref.cwiseAbs().maxCoeff());
  if (GetParam() == "l2mlr") ASSERT_GT((plain.workers[0].W() - ref).cwiseAbs().maxCoeff(), 1e-2f * scale);
  for (int servers : {1, 2}) {
    const auto run = expect_same_w(P, with_fms(cfg, servers), ref, fmt::format("{} server(s)", servers));
    if (GetParam() == "sparse_coding") {  // every atom inside the unit ball
      EXPECT_LE(run.workers[0].W().colwise().norm().maxCoeff(), 1.0f + 1e-5f) << servers;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ProximalModels, FmsProx, ::testing::Values("l2mlr", "sparse_coding"));

// A general prox makes the servers answer whole clocks: with more blocks per shard than the push
// window, the workers must still push every block of a clock (a window would wait for pulls that
// only come once the clock is complete: the job hung at clock 0 with sparse coding's 8 MiB W).
TEST(FmsWholeClocks, ShardsOfMoreBlocksThanTheWindowStillCompleteEveryClock) {
  Config cfg = small_config();
  cfg.model.name = "sparse_coding";
  cfg.model.atoms = 6;
  cfg.data.features = 40000;  // W about 40000 x 6: 8 blocks per shard with 1 and with 2 servers
  cfg.data.synthetic_density = 0.01;
  cfg.data.synthetic_samples = 120;
  cfg.optimizer.lr = 0.05;
  cfg.optimizer.minibatch = 4;
  cfg.stop.max_clocks = 6;
  cfg.runtime.peer_timeout_s = 20;  // the hang this guards against fails in 20 s
  const int P = 2;
  const auto sfb = run_scheme(P, cfg);
  const Matrix& ref = sfb.workers[0].W();
  for (int servers : {1, 2}) {
    ASSERT_GT(ps_blocks(ref.rows(), ref.cols(), 0, servers).count(), FmsExchange::kWindow);
    expect_same_w(P, with_fms(cfg, servers), ref, fmt::format("{} server(s)", servers));
  }
}

// Dense v and sparse v (libsvm-like rows at density 0.2: v = x travels as index/value pairs, and the
// theory counts the nonzeros the workers report sending).
class SchemeBytes : public ::testing::TestWithParam<double> {};

TEST_P(SchemeBytes, MeasuredBytesPerClockMatchTheory) {
  Config cfg = small_config();
  cfg.data.features = 200;
  cfg.data.classes = 40;
  cfg.data.synthetic_density = GetParam();
  cfg.optimizer.minibatch = 24;  // the per-message headers (not in the theory) stay under 1%
  const int P = 4;
  for (std::string scheme : {"sfb", "halton", "fms", "allreduce"}) {
    Config c = cfg;
    if (scheme == "halton") {
      c.sfb.broadcast = sfb::Broadcast::kHalton;
      // Reconciled every 5 clocks: a period that divides the run, so the final reconciliation at
      // the last clock is one of the periodic ones (the theory is per clock).
      c.sfb.reconcile_every = 5;
      ASSERT_EQ(c.stop.max_clocks % 5, 0);
    } else {
      c.comm.scheme = *choice_named<Scheme>(scheme);
    }
    const auto run = run_scheme(P, c);
    int64_t bytes = 0;
    for (const auto& w : run.workers) bytes += w.self.bytes_sent + w.self.bytes_from_servers;
    // rank 0 knows every rank's statistics
    int64_t from_stats = 0, pairs = 0, nonzeros = 0;
    for (const auto& s : run.workers[0].all) {
      from_stats += s.bytes_sent + s.bytes_from_servers;
      pairs += s.pairs_sent;
      nonzeros += s.v_nonzeros_sent;
    }
    // The statistics are taken before the final handshake's few control bytes.
    EXPECT_NEAR(static_cast<double>(from_stats), static_cast<double>(bytes), 1e-3 * static_cast<double>(bytes))
        << scheme;
    const bool sparse = GetParam() < 1 && (scheme == "sfb" || scheme == "halton");
    if (sparse) ASSERT_GT(nonzeros, 0) << scheme;
    const double v_nnz = sparse ? static_cast<double>(nonzeros) / static_cast<double>(pairs) : -1.0;
    const double measured = static_cast<double>(bytes) / static_cast<double>(c.stop.max_clocks);
    const double theory = theory_bytes_per_clock(c, P, 40, 201, v_nnz);
    EXPECT_NEAR(measured / theory, 1.0, 0.02) << scheme << ": " << measured << " vs " << theory;
  }
}

INSTANTIATE_TEST_SUITE_P(DenseAndSparseV, SchemeBytes, ::testing::Values(1.0, 0.2));

// The SFB paper's table of costs per clock (its Table 1, as docs/paper.md states it; floats of 4
// bytes), checked against what the schemes send and apply, for several (P, K, J, D, Q):
//   bytes, the whole job:  SFB full P (P-1) K (J + D); Halton P Q K (J + D); FMS 2 P J D (every
//                          worker pushes J D and pulls J D); the all-reduce 2 (P-1) J D; sharded
//                          P (P-1) K (D + 1 + P w) (every rank's K rows and labels to the others,
//                          and its share of the P K samples' w statistics, MLR's w = 5);
//   update, per worker:    SFB full P K pairs on its J rows; Halton (Q + 1) K (its own and its Q
//                          in-neighbours'); sharded P K pairs on its J / P rows.
// Measured as the difference of two runs' counters (10 and 20 clocks), so the start, the
// evaluation at clock 0 and the end's are left out as the table leaves them out. What the table
// does not count is framing: a message head for each peer a clock (SFB 56 bytes to every peer,
// its batch's or a clock marker; sharded 29; the ring all-reduce 24 a step; FMS 96 a worker),
// bounded here by 64 bytes an ordered pair of ranks. A protocol change that sends more or fewer
// bytes a clock, or a formula changed here or in docs/paper.md, fails it.
struct CostCase {
  int P;
  int64_t K, J, D;
  int Q;  // Halton's receivers
};

class PaperCostTable : public ::testing::TestWithParam<CostCase> {};

TEST_P(PaperCostTable, BytesAndUpdatesPerClockAreTheTables) {
  const CostCase k = GetParam();
  Config cfg = testing::with_schedule(testing::quiet_synthetic(k.D - 1, k.J, 400, 40), k.K, 0.1, 1000, 40);
  cfg.runtime.peer_timeout_s = 60;
  const double P = k.P, K = static_cast<double>(k.K), J = static_cast<double>(k.J), D = static_cast<double>(k.D),
               Q = k.Q, w = 5;
  struct Row {
    std::string scheme;
    double bytes;  // the table's, the whole job's per clock
    double pairs;  // pairs a worker applies a clock (0: a dense update, not counted in pairs)
  };
  const std::vector<Row> table = {
      {"sfb", 4 * P * (P - 1) * K * (J + D), P * K},
      {"halton", 4 * P * Q * K * (J + D), (Q + 1) * K},
      {"fms", 4 * 2 * P * J * D, 0},
      {"allreduce", 4 * 2 * (P - 1) * J * D, 0},
      {"sharded", 4 * P * (P - 1) * K * (D + 1 + P * w), P * K},
  };
  const std::string shape = fmt::format("P {} K {} J {} D {} Q {}", k.P, k.K, k.J, k.D, k.Q);
  for (const Row& row : table) {
    Config c = cfg;
    if (row.scheme == "halton") {
      c.sfb.broadcast = sfb::Broadcast::kHalton;
      c.sfb.halton_q = k.Q;
      c.sfb.reconcile = sfb::Reconcile::kOff;  // the paper's Halton has no reconciliation
    } else {
      c.comm.scheme = *choice_named<Scheme>(row.scheme);
    }
    std::vector<int64_t> bytes, pairs;
    for (int64_t clocks : {10, 20}) {
      c.stop.max_clocks = clocks;
      const auto run = run_scheme(k.P, c);
      int64_t b = 0;
      for (const auto& wr : run.workers) {
        ASSERT_EQ(wr.final_clock, clocks) << row.scheme;
        b += wr.self.bytes_sent + wr.self.bytes_from_servers;
      }
      bytes.push_back(b);
      pairs.push_back(run.workers[static_cast<size_t>(k.P - 1)].self.pairs_applied);
    }
    const double measured = static_cast<double>(bytes[1] - bytes[0]) / 10.0;
    // Whatever the table leaves out is framing: at most 64 bytes a clock for each ordered pair of
    // ranks that talk (worker to worker; FMS: worker to server, both ways).
    const double framing = row.scheme == "fms" ? 2 * 64 * P : 64 * P * (P - 1);
    EXPECT_GE(measured, row.bytes) << row.scheme << " at " << shape << ": " << measured << " bytes a clock";
    EXPECT_LE(measured - row.bytes, framing)
        << row.scheme << " at " << shape << ": " << measured << " bytes a clock, the table's " << row.bytes;
    if (row.pairs > 0) {
      EXPECT_EQ(static_cast<double>(pairs[1] - pairs[0]) / 10.0, row.pairs) << row.scheme << " at " << shape;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PaperCostTable,
                         ::testing::Values(CostCase{2, 8, 24, 401, 1}, CostCase{3, 16, 12, 301, 2},
                                           CostCase{5, 4, 30, 501, 2}, CostCase{5, 6, 40, 257, 1}));

TEST(SchemeBytes, ReconciliationsInARunCountTheOneItEndsOn) {
  EXPECT_EQ(reconciliations_in_run(0, 40, 5), 8);    // 5, 10, ..., 40: the last is periodic
  EXPECT_EQ(reconciliations_in_run(0, 40, 6), 7);    // 6, ..., 36 and the run's end, 40
  EXPECT_EQ(reconciliations_in_run(0, 40, 100), 1);  // the end's alone
  EXPECT_EQ(reconciliations_in_run(12, 40, 6), 5);   // resumed at 12: 18, 24, 30, 36, 40
  EXPECT_EQ(reconciliations_in_run(0, 0, 6), 0);
  EXPECT_EQ(reconciliations_in_run(0, 40, 0), 0);
}

// A short Halton run whose period does not divide it (or exceeds it) ends on a reconciliation of
// its own: the theory of the run counts it. With K = 2 a clock's batches are small beside W (40 x
// 801), so that one all-reduce is a quarter of the run's bytes at a period of 100; the long run's
// rate (no clocks given) leaves it out and misses by more than the tolerance. 800 features keep a
// batch's 56-byte header and the clock markers under 1% (with 200, 3.6%).
TEST(SchemeBytes, HaltonTheoryCountsTheFinalReconciliation) {
  Config cfg = small_config();
  cfg.data.features = 800;
  cfg.data.classes = 40;
  cfg.optimizer.minibatch = 2;
  cfg.sfb.broadcast = sfb::Broadcast::kHalton;
  const int P = 4;
  for (int64_t every : {6, 100}) {
    Config c = cfg;
    c.sfb.reconcile_every = every;
    ASSERT_NE(c.stop.max_clocks % every, 0);
    const auto run = run_scheme(P, c);
    int64_t bytes = 0;
    for (const auto& w : run.workers) bytes += w.self.bytes_sent;
    ASSERT_EQ(run.workers[0].final_clock, c.stop.max_clocks);
    const double measured = static_cast<double>(bytes) / static_cast<double>(c.stop.max_clocks);
    const double theory = theory_bytes_per_clock(c, P, 40, 801, -1, 0, c.stop.max_clocks);
    EXPECT_NEAR(measured / theory, 1.0, 0.02) << every << ": " << measured << " vs " << theory;
    if (every == 100) EXPECT_GT(measured / theory_bytes_per_clock(c, P, 40, 801, -1), 1.1) << "long-run rate";
  }
}

TEST(Topology, FullConnectsEveryPair) {
  const runtime::Topology t = runtime::Topology::full(4);
  EXPECT_EQ(t.out[1], (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(t.in[1], (std::vector<int>{0, 2, 3}));
  EXPECT_TRUE(runtime::Topology::full(1).out[0].empty());
}

TEST(Halton, OffsetsFollowTheSequenceAndSkipRepeats) {
  EXPECT_THAT(runtime::Topology::halton_offsets(6, 2), ElementsAre(3, 1));
  EXPECT_THAT(runtime::Topology::halton_offsets(8, 0), ElementsAre(4, 2, 6));  // Q = log2 8
  EXPECT_THAT(runtime::Topology::halton_offsets(5, 4), ElementsAre(2, 1, 3, 4));
  EXPECT_EQ(sfb::halton_receivers(6, 0), 3);
  EXPECT_TRUE(runtime::Topology::halton_offsets(1, 0).empty());
  const auto t = runtime::Topology::halton(6, 2);
  EXPECT_THAT(t.out[0], ElementsAre(3, 1));
  EXPECT_THAT(t.out[5], ElementsAre(2, 0));
  EXPECT_THAT(t.in[0], ElementsAre(3, 5));
}

TEST(Halton, StaticOffsetsWithACommonDivisorOfPSplitTheWorkersIntoIslands) {
  // P = 8, default Q = 3: offsets 4, 2, 6 (all even): even and odd ranks never talk.
  EXPECT_THAT(runtime::Topology::halton(8, 0).islands(), ElementsAre(ElementsAre(0, 2, 4, 6), ElementsAre(1, 3, 5, 7)));
  // The SFB paper's P = 12 with Q = 2 (offsets 6, 3) or 3 (6, 3, 9): three islands.
  for (int q : {2, 3}) EXPECT_EQ(runtime::Topology::halton(12, q).islands().size(), 3u) << q;
  EXPECT_EQ(runtime::Topology::halton(6, 2).islands().size(), 1u);  // offsets 3, 1
  EXPECT_EQ(runtime::Topology::full(8).islands().size(), 1u);
  // Brute force over P and Q: islands exist exactly when gcd(P, offsets) > 1.
  for (int P = 2; P <= 40; ++P)
    for (int q = 1; q < std::min(P, 7); ++q) {
      int g = P;
      for (int off : runtime::Topology::halton_offsets(P, q)) g = std::gcd(g, off);
      EXPECT_EQ(runtime::Topology::halton(P, q).islands().size(), static_cast<size_t>(g)) << P << " " << q;
    }
}

TEST(Halton, StaticIslandsAreAConfigErrorNamingPQOffsetsAndIslands) {
  Config cfg = small_config();
  cfg.sfb.broadcast = sfb::Broadcast::kHaltonStatic;
  try {
    runtime::make_topology(cfg, 8);
    FAIL() << "P = 8 with the default Q has two islands";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("P = 8 workers and Q = 3 (offsets 4, 2, 6)"));
    EXPECT_THAT(e.what(), HasSubstr("2 islands"));
    EXPECT_THAT(e.what(), HasSubstr("{0, 2, 4, 6} {1, 3, 5, 7}"));
  }
  EXPECT_NO_THROW(runtime::make_topology(cfg, 6));
  cfg.sfb.broadcast = sfb::Broadcast::kHalton;
  EXPECT_TRUE(runtime::make_topology(cfg, 8).rotating);
}

TEST(Halton, RotatingReceiversReachEveryPeerWithinCeilPMinus1OverQClocks) {
  for (int P = 2; P <= 40; ++P)
    for (int q = 1; q < P; q += 1 + q / 3) {
      const auto t = runtime::Topology::halton_rotating(P, q);
      // The cycle is every non-zero offset once, starting with the static offsets.
      auto cycle = t.cycle;
      const auto first = runtime::Topology::halton_offsets(P, q);
      ASSERT_TRUE(std::equal(first.begin(), first.end(), cycle.begin())) << P << " " << q;
      std::sort(cycle.begin(), cycle.end());
      for (int i = 0; i < P - 1; ++i) ASSERT_EQ(cycle[static_cast<size_t>(i)], i + 1) << P;
      EXPECT_EQ(t.islands().size(), 1u) << P << " " << q;
      // From any starting clock, every (sender, receiver) pair carries data within the bound,
      // and each clock has exactly Q distinct receivers per sender.
      const int64_t bound = (P - 1 + q - 1) / q;
      for (int64_t start : {int64_t{0}, int64_t{5}, int64_t{1000003}})
        for (int p = 0; p < P; ++p) {
          std::vector<char> reached(static_cast<size_t>(P), 0);
          for (int64_t c = start; c < start + bound; ++c) {
            auto r = t.data_receivers(p, c);
            EXPECT_EQ(r.size(), static_cast<size_t>(q));
            for (int dst : r) {
              EXPECT_NE(dst, p);
              EXPECT_TRUE(t.sends_data(p, dst, c));
              reached[static_cast<size_t>(dst)] = 1;
            }
          }
          for (int dst = 0; dst < P; ++dst)
            EXPECT_TRUE(dst == p || reached[static_cast<size_t>(dst)]) << P << " " << q << " " << p << "->" << dst;
        }
    }
}

TEST(Halton, RotatingWorkersApplyExactlyThePairsAddressedToThem) {
  // P = 8 (the static variant would split), under SSP(1) and BSP.
  for (int64_t staleness : {1, 0}) {
    Config cfg = small_config();
    cfg.sfb.broadcast = sfb::Broadcast::kHalton;
    cfg.sfb.staleness = staleness;
    const int P = 8;
    const auto run = run_scheme(P, cfg);
    const auto topo = runtime::make_topology(cfg, P);
    for (int dst = 0; dst < P; ++dst) {
      const auto& w = run.workers[static_cast<size_t>(dst)];
      EXPECT_EQ(w.final_clock, cfg.stop.max_clocks);
      for (int src = 0; src < P; ++src) {
        int64_t clocks = 0;
        for (int64_t c = 0; c < cfg.stop.max_clocks; ++c) clocks += src == dst || topo.sends_data(src, dst, c);
        EXPECT_EQ(w.pairs_applied_from[static_cast<size_t>(src)], cfg.optimizer.minibatch * clocks)
            << src << " -> " << dst << ", staleness " << staleness;
        if (src != dst)
          EXPECT_EQ(run.workers[static_cast<size_t>(src)].pairs_sent_to[static_cast<size_t>(dst)],
                    cfg.optimizer.minibatch * clocks);
      }
      EXPECT_LE(w.self.max_lead, staleness + 1);
      EXPECT_TRUE(w.W().allFinite());
    }
  }
}

// The drift of the last evaluation that knew one (rank 0's records), and how many knew one.
std::pair<double, int> last_drift(const runtime::WorkerResult& w) {
  double d = NAN;
  int known = 0;
  for (const auto& r : w.evals)
    if (r.replica_drift_clock >= 0) {
      d = r.replica_drift;
      ++known;
    }
  return {d, known};
}

TEST(ReplicaDrift, ExactlyZeroUnderFullBroadcastBspAndPositiveUnderPartialBroadcast) {
  Config cfg = small_config();
  cfg.stop.max_clocks = 60;
  const auto full = run_scheme(4, cfg);
  int known = 0;
  for (const auto& r : full.workers[0].evals)
    if (r.replica_drift_clock >= 0) {
      ++known;
      EXPECT_EQ(r.replica_drift, 0.0) << "clock " << r.replica_drift_clock;
    }
  EXPECT_GE(known, 2);
  cfg.sfb.broadcast = sfb::Broadcast::kHalton;
  const auto [drift, known_halton] = last_drift(run_scheme(8, cfg).workers[0]);
  EXPECT_GE(known_halton, 2);
  EXPECT_GT(drift, 0.0);
  EXPECT_LT(drift, 1.0);  // mixing: the replicas stay close to their mean
}

TEST(Halton, EachWorkerAppliesExactlyItsInNeighboursPairs) {
  Config cfg = small_config();
  cfg.sfb.broadcast = sfb::Broadcast::kHaltonStatic;
  cfg.sfb.halton_q = 2;
  cfg.sfb.staleness = 1;
  const int P = 6;
  const auto run = run_scheme(P, cfg);
  const auto topo = runtime::Topology::halton(P, 2);
  for (int dst = 0; dst < P; ++dst) {
    const auto& w = run.workers[static_cast<size_t>(dst)];
    for (int src = 0; src < P; ++src) {
      const auto& in = topo.in[static_cast<size_t>(dst)];
      const bool listens = src == dst || std::find(in.begin(), in.end(), src) != in.end();
      EXPECT_EQ(w.pairs_applied_from[static_cast<size_t>(src)],
                listens ? cfg.optimizer.minibatch * cfg.stop.max_clocks : 0)
          << src << " -> " << dst;
    }
    EXPECT_LE(w.self.max_lead, cfg.sfb.staleness + 1);
  }
}

// The PUSH/PULL block grid: every shard tiled exactly, blocks an eighth of the shard within
// [64 KiB, 1 MiB] (or one row when a row is larger), workers and servers on the same grid.
TEST(PsBlocks, TileEveryShardInBlocksOfAnEighthWithinTheLimits) {
  const std::vector<std::tuple<int64_t, int64_t, int>> shapes{
      {1, 1, 1},       {5, 30, 2},      {40, 4096, 1},  {40, 4096, 2},   {8192, 8192, 1},
      {8192, 8192, 4}, {7, 1 << 19, 3}, {31, 16384, 2}, {64, 100000, 1}, {3, 512, 4}};
  for (const auto& [J, D, S] : shapes) {
    int64_t most = 0;  // the busiest shard's blocks: the predictor's window rounds count them
    for (int s = 0; s < S; ++s) {
      const PsBlocks b = ps_blocks(J, D, s, S);
      most = std::max(most, b.count());
      ASSERT_EQ(b.begin, shard_begin(J, s, S));
      ASSERT_EQ(b.end, shard_begin(J, s + 1, S));
      EXPECT_EQ(b.rows_per_block, ps_block_rows(b.end - b.begin, D));
      const int64_t row_bytes = 4 * D, shard_bytes = (b.end - b.begin) * row_bytes;
      int64_t rows = 0;
      for (int64_t k = 0; k < b.count(); ++k) {
        EXPECT_EQ(b.block_begin(k), b.begin + rows);
        EXPECT_EQ(b.block_of(b.block_begin(k), b.block_rows(k)), k);
        EXPECT_EQ(b.block_of(b.block_begin(k), b.block_rows(k) + 1), -1);
        rows += b.block_rows(k);
        const int64_t bytes = b.block_rows(k) * row_bytes;
        EXPECT_TRUE(bytes <= kPsBlockBytes || b.block_rows(k) == 1) << J << "x" << D << " S " << S;
      }
      EXPECT_EQ(rows, b.end - b.begin);
      if (shard_bytes >= 8 * kPsBlockBytes && row_bytes <= kPsBlockBytes) {
        EXPECT_GE(b.rows_per_block * row_bytes * 2, kPsBlockBytes) << J << "x" << D << " S " << S;
      }
      if (shard_bytes >= 2 * kPsMinBlockBytes && row_bytes <= kPsMinBlockBytes) {
        EXPECT_GE(b.count(), 2) << J << "x" << D << " S " << S << ": a small shard is still pipelined";
      }
    }
    EXPECT_EQ(ps_rounds(J, D, S), std::max<int64_t>(1, (most + kPsWindowBlocks - 1) / kPsWindowBlocks))
        << J << "x" << D << " S " << S;
  }
  EXPECT_EQ(ps_rounds(31, 16384, 2), 4);            // 15 rows in 15 blocks of 1 row (the 16 rows go in 8 of 2)
  EXPECT_EQ(ps_rounds(64, 100000, 1), 8);           // 32 blocks of 2 rows (25.6 MB / 1 MiB would say 25)
  EXPECT_EQ(ps_blocks(40, 4096, 0, 1).count(), 8);  // 640 KiB: 80 KiB blocks of 5 rows
}

// Several blocks per shard in flight (each server adds and returns blocks as they complete): the
// same W as SFB, bitwise equal replicas, with 1 and 2 servers.
TEST(Fms, ManyBlocksPerShardComputeTheSameWAsSfb) {
  Config cfg = testing::with_schedule(testing::quiet_synthetic(4096, 40, 300, 50), 4, 0.2, 10, 50);
  cfg.stop.max_clocks = 12;
  cfg.runtime.peer_timeout_s = 60;
  ASSERT_GE(ps_blocks(40, 4096, 0, 2).count(), 4);
  const int P = 3;
  const auto sfb = run_scheme(P, cfg);
  const Matrix& ref = sfb.workers[0].W();
  ASSERT_GT(ref.cwiseAbs().maxCoeff(), 1e-3f);
  for (int S : {1, 2}) expect_same_w(P, with_fms(cfg, S), ref, fmt::format("{} server(s)", S));
}

// A silent parameter server: the workers' bounded wait names the servers (their clocks come
// through them), not only the workers whose clocks are missing.
TEST(Fms, AWorkerWhoseServerIsSilentNamesTheServers) {
  Config cfg = small_config();
  cfg.comm.scheme = sfb::Scheme::kFms;
  cfg.fms.servers = 1;
  cfg.runtime.peer_timeout_s = 1.0;
  const int P = 2;
  std::vector<std::string> errors(static_cast<size_t>(P));
  testing::run_ranks(P + 1, [&](comm::Transport& t) {
    const int r = t.rank();
    if (r >= P) {  // the server never answers
      std::this_thread::sleep_for(std::chrono::seconds(3));
      return;
    }
    const auto data = io::load_data(cfg.data, cfg.job.seed, r, P, r == 0);
    auto model = models::make_model(cfg, data.train, data.total_train, r, P);
    auto exchange = make_exchange(cfg, model->has_prox());
    runtime::Worker w(cfg, t, data.train, &data.test, *model, runtime::with_study_hooks(cfg.runtime, r), {},
                      exchange.get());
    try {
      w.run();
    } catch (const CommError& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
  for (const auto& e : errors) EXPECT_THAT(e, HasSubstr("through the fms exchange: server ranks 2..2"));
}

// A server's first message may take what run() is told (the workers may have work of their own
// first: sfbd --profile's measurements), its later ones the peer timeout: workers that start 2.5 s
// late train to the end with a server told 6 s, and with one told nothing it names what it waited
// for (rank 0's INIT) after the 1 s peer timeout.
TEST(Fms, AServerWaitsForItsFirstMessageAsLongAsItIsTold) {
  Config cfg = with_fms(small_config(), 1);
  cfg.stop.max_clocks = 5;
  cfg.runtime.peer_timeout_s = 1.0;
  const int P = 2;
  for (const double first_s : {6.0, 0.0}) {
    std::vector<std::string> errors(static_cast<size_t>(P + 1));
    testing::run_ranks(P + 1, [&](comm::Transport& t) {
      const int r = t.rank();
      const int part = r < P ? r : 0;
      const auto data = io::load_data(cfg.data, cfg.job.seed, part, P, r == 0);
      auto model = models::make_model(cfg, data.train, data.total_train, part, P);
      try {
        if (r >= P) {
          FmsServer(cfg.fms, cfg.runtime.peer_timeout_s, t, stored_rows(model->layout(), model->rows(), model->cols()),
                    stored_cols(model->layout(), model->rows(), model->cols()))
              .run(first_s);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        auto exchange = make_exchange(cfg, model->has_prox());
        runtime::Worker(cfg, t, data.train, &data.test, *model, {}, {}, exchange.get()).run();
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
    if (first_s > 0) {
      for (int r = 0; r <= P; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
      continue;
    }
    EXPECT_THAT(errors[2], HasSubstr("server rank 2: nothing for 1 s (runtime.peer_timeout_s) at version -1; waiting "
                                     "for worker rank 0's INIT (0 of 1 blocks of its initial rows in)"));
  }
}

// Worker rank 0 of one worker and one server, of W0's shape; `deliver` gets what it hands its update
// thread.
runtime::ExchangeHost one_worker_host(comm::Transport* t, const Matrix& W0,
                                      std::function<void(runtime::DenseUpdatePtr)> deliver) {
  runtime::ExchangeHost host;
  host.transport = t;
  host.workers = 1;
  host.J = static_cast<int32_t>(W0.rows());
  host.D = static_cast<int32_t>(W0.cols());
  host.initial_W = &W0;
  host.deliver = std::move(deliver);
  return host;
}

// Read-my-writes under SSP: the worker applies its own batch at once and every version of W it gets
// from the servers carries its own updates that version does not include yet (formed from the kept
// factors, block by block).
TEST(Fms, ReadMyWritesKeepsOwnUpdatesTheServersHaveNotApplied) {
  auto group = comm::make_inproc_group(2);  // rank 0 a worker, rank 1 the server
  const Matrix W0 = Matrix::Zero(2, 3);
  std::vector<runtime::DenseUpdatePtr> got;
  const auto host =
      one_worker_host(group[0].get(), W0, [&](runtime::DenseUpdatePtr b) { got.push_back(std::move(b)); });
  FmsExchange ex(1, /*read_my_writes=*/true, /*whole_clocks=*/false);
  ASSERT_TRUE(ex.reads_own_writes());
  // The server's answer to rank 0's one INIT block, which start() waits for.
  group[1]->send(0, comm::kTagPs, encode_ps(PsType::kInitAck, 0, 0, 0, 0, nullptr));
  ex.start(host);
  const auto init = group[1]->try_recv();
  ASSERT_TRUE(init.has_value());
  EXPECT_EQ(decode_ps_header(init->data, 0).type, PsType::kInit);
  Matrix own[3];
  for (int c = 0; c < 3; ++c) {
    auto b = std::make_shared<SfBatch>(
        testing::dense_sf_batch(0, c, Matrix::Constant(1, 2, 1.0f + c), Matrix::Constant(1, 3, 0.5f)));
    dense_update(*b, Layout::kRowMajor, own[c]);
    ex.send_own(b);
    ASSERT_EQ(got.size(), static_cast<size_t>(c + 1));
    EXPECT_EQ(got.back()->kind, runtime::DenseUpdate::Kind::kOwn);
    EXPECT_EQ(got.back()->clock, c);
    EXPECT_EQ(got.back()->own, b);
  }
  // The server's W after clock 0 (version 1): the worker's W is it plus its own clocks 1 and 2.
  const Matrix server1 = Matrix::Constant(2, 3, 7.0f);
  ex.on_message({1, comm::kTagPs, encode_ps(PsType::kPull, 1, 0, 2, 3, server1.data())});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got.back()->kind, runtime::DenseUpdate::Kind::kReplace);
  EXPECT_EQ(got.back()->clock, 0);
  EXPECT_TRUE(got.back()->last);
  EXPECT_EQ(got.back()->row_begin, 0);
  EXPECT_EQ(got.back()->rows, 2);
  EXPECT_EQ(*got.back()->block, Matrix(server1 + own[1] + own[2]));
  // Version 3 includes all three: the server's W as it is.
  ex.on_message({1, comm::kTagPs, encode_ps(PsType::kPull, 2, 0, 2, 3, server1.data())});
  EXPECT_EQ(*got.back()->block, Matrix(server1 + own[2]));
  ex.on_message({1, comm::kTagPs, encode_ps(PsType::kPull, 3, 0, 2, 3, server1.data())});
  EXPECT_EQ(*got.back()->block, server1);
  // Under BSP nothing is kept.
  FmsExchange bsp(1, false, false);
  EXPECT_FALSE(bsp.reads_own_writes());
}

// Rank 0 seeds a server at most a window of INIT blocks ahead of the server's answers: a transport
// receives whatever arrives, so without the window a server short of CPU held most of W's INIT
// blocks in its inbox besides its rows (40-50 MiB over a 64 MiB W, mpi.one_w_per_rank).
TEST(Fms, RankZeroSeedsAServerAtMostAWindowOfInitBlocksAhead) {
  auto group = comm::make_inproc_group(2);  // rank 0 a worker, rank 1 a server that never answers
  group[0]->set_peer_timeout(0.3);
  const Matrix W0 = Matrix::Ones(512, 2048);  // 4 MiB
  ASSERT_GT(ps_blocks(512, 2048, 0, 1).count(), FmsExchange::kWindow);
  const auto host = one_worker_host(group[0].get(), W0, [](runtime::DenseUpdatePtr) {});
  FmsExchange ex(1, false, false);
  EXPECT_THROW(ex.start(host), CommError);
  int64_t inits = 0;
  while (auto m = group[1]->try_recv()) inits += decode_ps_header(m->data, 0).type == PsType::kInit;
  EXPECT_EQ(inits, FmsExchange::kWindow);
}

TEST(Fms, ReadMyWritesUnderSspKeepsTheStalenessBoundAndEveryUpdate) {
  Config cfg = small_config();
  cfg.comm.scheme = sfb::Scheme::kFms;
  cfg.sfb.staleness = 2;
  cfg.runtime.slow_rank = 1;
  cfg.runtime.slow_ms = 2;
  const auto run = run_scheme(3, cfg);
  for (const auto& w : run.workers) {
    // Clock c starts once every worker's clocks < c - s are in the servers' W: lead <= s + 1.
    EXPECT_LE(w.self.max_lead, cfg.sfb.staleness + 1);
    EXPECT_EQ(w.final_clock, cfg.stop.max_clocks);
    // The last version includes every update: the replicas end equal, as under BSP.
    EXPECT_EQ(w.self.checksum, run.workers[0].self.checksum);
  }
  Config bsp = cfg;
  bsp.sfb.staleness = 0;
  bsp.runtime.slow_ms = 0;
  const Matrix ref = run_scheme(3, bsp).workers[0].W();
  EXPECT_GT((run.workers[0].W() - ref).cwiseAbs().maxCoeff(), 0.0f);  // SSP computed from other (staler) W
}

TEST(PsCodec, BadMessagesAreRejectedNamingTheSender) {
  Matrix m = Matrix::Ones(4, 3);
  comm::Bytes ok = encode_ps(PsType::kPush, 5, 2, 2, 3, m.data() + 6);
  const PsHeader h = decode_ps_header(ok, 1);
  EXPECT_EQ(h.clock, 5);
  EXPECT_EQ(h.row_begin, 2);
  comm::Bytes short_msg(ok.begin(), ok.begin() + 20);
  EXPECT_THAT([&] { decode_ps_header(short_msg, 3); }, ::testing::ThrowsMessage<CommError>(HasSubstr("from rank 3")));
  comm::Bytes truncated(ok.begin(), ok.end() - 4);
  EXPECT_THAT([&] { decode_ps_header(truncated, 2); },
              ::testing::ThrowsMessage<CommError>(HasSubstr("its header says")));
  comm::Bytes bad = ok;
  bad[0] = std::byte{0};
  EXPECT_THAT([&] { decode_ps_header(bad, 2); }, ::testing::ThrowsMessage<CommError>(HasSubstr("bad magic")));
}

TEST(LatencyTransport, NoMessageIsDeliveredBeforeItsLatency) {
  auto group = comm::make_inproc_group(2);
  comm::LatencyTransport slow(std::move(group[1]), 20000.0);  // 20 ms
  const auto t0 = std::chrono::steady_clock::now();
  const std::byte b[1] = {std::byte{7}};
  group[0]->send(1, comm::kTagControl, b);
  const comm::Message m = slow.recv(comm::kTagControl);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(20));
  EXPECT_EQ(m.src, 0);
  EXPECT_EQ(m.data.size(), 1u);
}

TEST(Schemes, ConfigErrorsNameTheKeys) {
  Config cfg = small_config();
  cfg.comm.scheme = sfb::Scheme::kFms;
  cfg.fms.servers = 3;
  EXPECT_THAT([&] { runtime::worker_count(cfg, 3); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("fms.servers = 3 needs more than 3 ranks")));
}

}  // namespace
}  // namespace sfb::baselines
