// comm.scheme = "sharded" (runtime/sharded_worker.h): under BSP it is SFB's full broadcast computed
// another way, so for the same P, K, seed and partitions its W (gathered from the blocks in file
// order) must equal the SFB run's W within float tolerance, for MLR (dense, sparse in either layout),
// L2-MLR and DML, and its objective at every evaluation SFB's; its objective and accuracy, reduced across the blocks,
// must equal the model's own on the gathered W; a re-sharded resume must continue as the SFB engine would from the same
// W; and what cannot shard is refused with its reason.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/row_blocks.h"
#include "sfb/io/load_data.h"
#include "sfb/io/model_file.h"
#include "sfb/models/registry.h"
#include "sfb/runtime/sharded_worker.h"
#include "sfb/runtime/worker.h"
#include "testing/configs.h"
#include "testing/rank_threads.h"

namespace sfb::runtime {
namespace {

using ::testing::HasSubstr;

// (model, sparse data, layout)
using Case = std::tuple<std::string, bool, std::string>;

Config case_config(const Case& c) {
  Config cfg = testing::with_schedule(testing::quiet_synthetic(30, 7, 600, 120), 6, 0.2, 5, 150);
  cfg.runtime.peer_timeout_s = 60;
  cfg.model.name = std::get<0>(c);
  if (std::get<1>(c)) cfg.data.synthetic_density = 0.2;
  cfg.model.layout = std::get<2>(c);
  cfg.model.lambda = 0.01;                                // l2mlr: a shrinkage that shows
  cfg.model.dim = 9;                                      // dml: 9 rows of L over 3 ranks
  if (cfg.model.name == "dml") cfg.optimizer.lr = 0.005;  // 0.2 diverges within 5 clocks
  return cfg;
}

struct SchemeRun {
  Matrix W;  // the final W, row-major J x D
  std::vector<EvalRecord> evals;
  StopReason stop_reason = StopReason::kMaxClocks;
};

// The SFB engine (full broadcast, BSP) on P ranks; `from`: its start W (null: the model's init).
SchemeRun run_sfb(int P, const Config& cfg, const Matrix* from = nullptr, int64_t from_clock = 0) {
  SchemeRun out;
  testing::run_ranks(P, [&](comm::Transport& t) {
    // Rank 0 evaluates the objective on the sample the sharded engine reduces over.
    const io::LoadRequest req{t.rank(), P, t.rank() == 0, cfg.eval.train_sample};
    const auto data = io::load_data(cfg.data, cfg.job.seed, req);
    auto model = models::make_model(cfg, data.train, data.total_train, t.rank(), P);
    WorkerStart start;
    start.W = from;
    start.clock = from_clock;
    start.objective_rows = &data.eval_sample;
    Worker w(cfg, t, data.train, &data.test, *model, {}, start);
    auto r = w.run();
    if (t.rank() != 0) return;
    out.W = r.W();
    out.evals = r.evals;
  });
  return out;
}

// The sharded engine on P ranks: its W gathered in file order; on rank 0, the model's own objective
// and accuracy of that W beside the engine's last evaluation.
struct ShardedRun : SchemeRun {
  double model_objective = 0, model_accuracy = 0;
};

ShardedRun run_sharded(int P, const Config& cfg, const std::string& load = "", int64_t from_clock = 0) {
  ShardedRun out;
  testing::run_ranks(P, [&](comm::Transport& t) {
    const io::LoadRequest req{t.rank(), P, true, cfg.eval.train_sample};
    const auto data = io::load_data(cfg.data, cfg.job.seed, req);
    auto model = models::make_model(cfg, data.train, data.total_train, t.rank(), P);
    WorkerStart start;
    start.clock = from_clock;
    if (!load.empty())
      start.load = [&load](const RowSink& sink) { io::read_model(load, [&sink](int64_t, int64_t) { return sink; }); };
    ShardedWorker w(cfg, t, data.train, data.eval_sample, &data.test, *model, start);
    auto r = w.run();
    Matrix W(model->rows(), model->cols());
    w.file_order([&](const RowSource& src) { for_each_row_block(src, row_sink(W, Layout::kRowMajor)); });
    if (t.rank() != 0) return;
    out.W = W;
    out.evals = r.evals;
    out.stop_reason = r.stop_reason;
    out.model_objective = model->objective(api::Weights(W), data.eval_sample, cfg.eval.train_sample);
    out.model_accuracy = model->accuracy(api::Weights(W), data.test);
  });
  return out;
}

float max_rel_diff(const Matrix& a, const Matrix& ref) {
  return (a - ref).cwiseAbs().maxCoeff() / std::max(1.0f, ref.cwiseAbs().maxCoeff());
}

class ShardedScheme : public ::testing::TestWithParam<Case> {};

TEST_P(ShardedScheme, ComputesSfbFullBroadcastsWAndReducesTheModelsObjective) {
  Config cfg = case_config(GetParam());
  const int P = 3;
  for (int64_t clocks : {4, 17}) {
    cfg.stop.max_clocks = clocks;
    const SchemeRun sfb = run_sfb(P, cfg);
    ASSERT_GT(sfb.W.cwiseAbs().maxCoeff(), 0.01f);
    Config sh = cfg;
    sh.comm.scheme = Scheme::kSharded;
    const ShardedRun r = run_sharded(P, sh);
    ASSERT_EQ(r.W.rows(), sfb.W.rows());
    EXPECT_LT(max_rel_diff(r.W, sfb.W), 1e-4f) << "after " << clocks << " clocks";
    ASSERT_FALSE(r.evals.empty());
    EXPECT_EQ(r.evals.back().clock, clocks);
    EXPECT_NEAR(r.evals.back().objective, r.model_objective, 1e-4 * std::max(1.0, std::abs(r.model_objective)));
    EXPECT_NEAR(r.evals.back().accuracy, r.model_accuracy, 1e-9);
    // At every evaluation, not only the last: the same objective and accuracy as SFB's W then.
    for (const auto& e : r.evals) {
      const auto same =
          std::find_if(sfb.evals.begin(), sfb.evals.end(), [&](const EvalRecord& f) { return f.clock == e.clock; });
      ASSERT_NE(same, sfb.evals.end()) << "SFB did not evaluate clock " << e.clock;
      EXPECT_NEAR(e.objective, same->objective, 1e-4 * std::max(1.0, std::abs(same->objective))) << e.clock;
      EXPECT_NEAR(e.accuracy, same->accuracy, 0.01) << e.clock;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ShardedScheme,
                         ::testing::Values(Case{"mlr", false, "auto"}, Case{"mlr", true, "feature-major"},
                                           Case{"mlr", true, "row-major"}, Case{"l2mlr", true, "auto"},
                                           Case{"dml", false, "auto"}));

TEST(ShardedSchemeResume, ReshardedStartContinuesAsSfbWould) {
  Config cfg = case_config({"mlr", true, "auto"});
  cfg.stop.max_clocks = 6;
  Config sh = cfg;
  sh.comm.scheme = Scheme::kSharded;
  const ShardedRun first = run_sharded(3, sh);  // W at clock 6 from 3 blocks
  const std::string path = ::testing::TempDir() + "sharded_resume_test.bin";
  io::write_model(path, first.W);
  cfg.stop.max_clocks = sh.stop.max_clocks = 13;
  const SchemeRun sfb = run_sfb(2, cfg, &first.W, 6);  // 2 ranks from there, SFB
  const ShardedRun r = run_sharded(2, sh, path, 6);    // 2 ranks from the file, re-sharded
  std::remove(path.c_str());
  EXPECT_LT(max_rel_diff(r.W, sfb.W), 1e-4f);
  EXPECT_GT(max_rel_diff(r.W, first.W), 1e-3f);  // it trained
}

TEST(ShardedSchemeRefuses, WhatCannotShardWithItsReason) {
  Config cfg = testing::quiet_synthetic(10, 4, 100, 0);
  cfg.comm.scheme = Scheme::kSharded;
  const auto data = io::load_data(cfg.data, cfg.job.seed, 0, 1, false);
  auto mlr = models::make_model(cfg, data.train, data.total_train, 0, 1);
  EXPECT_EQ(sharded_refusal(cfg, *mlr), "");
  cfg.sfb.staleness = 2;
  EXPECT_THAT(sharded_refusal(cfg, *mlr), HasSubstr("BSP only"));
  cfg.sfb.staleness = 0;
  cfg.model.name = "l2mlr";
  cfg.model.solver = "sdca";
  auto sdca = models::make_model(cfg, data.train, data.total_train, 0, 1);
  EXPECT_THAT(sharded_refusal(cfg, *sdca), HasSubstr("model.solver = \"sdca\""));
  cfg.model.name = "sparse_coding";
  auto sc = models::make_model(cfg, data.train, data.total_train, 0, 1);
  EXPECT_THAT(sharded_refusal(cfg, *sc), HasSubstr("lasso over the whole dictionary"));
}

TEST(ShardedSchemeBlocks, CoverEveryRowOnceInRankOrder) {
  for (int64_t J : {5, 7, 100}) {
    int64_t next = 0;
    for (int r = 0; r < 5; ++r) {
      const RowBlock b = row_block(J, 5, r);
      EXPECT_EQ(b.row0, next);
      EXPECT_GE(b.rows, J / 5);
      next += b.rows;
    }
    EXPECT_EQ(next, J);
  }
}

}  // namespace
}  // namespace sfb::runtime
