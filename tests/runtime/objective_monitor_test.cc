// The objective monitor owns the snapshots it is handed: aborting it with snapshots still queued
// frees them (run under ASan in CI: a leak fails there), and a monitor that was never started can
// be destroyed with a full queue. A checkpoint replaces the previous one only after its weights
// were judged: finite weights whose objective diverged never replace a good checkpoint.
#include "sfb/runtime/objective_monitor.h"

#include <gtest/gtest.h>

#include "sfb/io/checkpoint.h"
#include "sfb/io/load_data.h"
#include "sfb/models/config_model_context.h"
#include "sfb/models/mlr.h"
#include "testing/configs.h"
#include "testing/files.h"

namespace sfb::runtime {
namespace {

std::unique_ptr<Snapshot> snapshot(int64_t clock, int64_t J, int64_t D) {
  auto s = std::make_unique<Snapshot>();
  s->record.clock = clock;
  s->W = Matrix::Zero(J, D);
  return s;
}

TEST(ObjectiveMonitor, AbortWithSnapshotsQueuedFreesThem) {
  const Config cfg = testing::quiet_synthetic(20, 3, 50, 10);
  const auto data = io::load_data(cfg.data, cfg.job.seed, 0, 1, true);
  models::ConfigModelContext ctx(cfg, data.train, data.total_train, 0, 1);
  const models::Mlr model(ctx);
  {
    ObjectiveMonitor m(cfg.eval, cfg.stop, {}, model, data.train, &data.test);
    // Not started: the queue (capacity 4) fills and nothing takes the snapshots.
    for (int c = 0; c < 4; ++c) m.submit(snapshot(c, model.rows(), model.cols()));
    EXPECT_EQ(m.queued(), 4u);
    m.abort();
  }
  {
    ObjectiveMonitor m(cfg.eval, cfg.stop, {}, model, data.train, &data.test);
    m.start();
    for (int c = 0; c < 3; ++c) m.submit(snapshot(c, model.rows(), model.cols()));
    m.abort();
    m.finish();  // no error: an abort is not a failure
    EXPECT_EQ(m.stop_reason(), "");
  }
}

TEST(ObjectiveMonitor, ACheckpointOfDivergedWeightsNeverReplacesTheLastGoodOne) {
  Config cfg = testing::quiet_synthetic(20, 3, 50, 10);
  cfg.stop.divergence_factor = 10;
  const auto data = io::load_data(cfg.data, cfg.job.seed, 0, 1, true);
  models::ConfigModelContext ctx(cfg, data.train, data.total_train, 0, 1);
  const models::Mlr model(ctx);
  const testing::TempDir dir;
  MonitorOutputs out;
  out.checkpoint = dir.file("ck.bin");
  ObjectiveMonitor m(cfg.eval, cfg.stop, out, model, data.train, &data.test);
  m.start();
  const auto submit = [&](int64_t clock, float w, bool evaluate, bool final = false) {
    auto s = snapshot(clock, model.rows(), model.cols());
    s->W.setConstant(0);
    s->W.col(0).setLinSpaced(-w, w);  // finite, and the larger w the larger the objective
    s->evaluate = evaluate;
    s->checkpoint = true;
    s->final = final;
    m.submit(std::move(s));
  };
  submit(0, 0, true);          // good: written
  submit(5, 1e6, false);       // between evaluations, finite but exploded: judged on its own, refused
  submit(10, 1e6, true);       // the evaluation that finds the divergence: refused
  submit(12, 0, false, true);  // after the run stopped as diverged: refused however it looks
  m.finish();
  EXPECT_EQ(m.stop_reason(), "diverged");
  EXPECT_EQ(io::read_checkpoint(out.checkpoint).clock, 0);
}

}  // namespace
}  // namespace sfb::runtime
