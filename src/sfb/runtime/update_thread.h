#pragma once
// The worker's update thread (worker.h): pops what the in-queue brings (batches of factors, a
// baseline's row blocks) and applies it to W under SharedWeights' exclusive lock; under BSP a
// clock only when every source's batch of it is here, in sender-rank order, so every replica
// performs the same float operations. It owns the update kernel, the BSP reorder buffer, the
// per-source counts of applied pairs, the drift sketcher and partial broadcast's reconciler;
// everything else it reaches through WorkerState's owners (the gate, the weights, the monitor).
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "sfb/runtime/reconciler.h"
#include "sfb/runtime/replica_drift.h"
#include "sfb/runtime/update_applier.h"
#include "sfb/runtime/worker_state.h"

namespace sfb::runtime {

class UpdateThread {
 public:
  explicit UpdateThread(WorkerState& s);
  void run();

  // Read once everything is applied (the gate orders it) or after the threads have ended.
  const std::vector<int64_t>& pairs_applied_from() const { return pairs_applied_from_; }
  const Reconciler* reconciler() const { return reconciler_.get(); }

 private:
  void apply(std::span<const SfBatchPtr> batches);
  void apply_scaled(SharedWeights::Writer& w, std::span<const SfBatch* const> raw);
  void apply_dense(const DenseUpdate& item);
  void count_applied(std::span<const SfBatch* const> raw);
  void clock_applied(int64_t clock);
  void apply_complete_clocks(std::map<std::pair<int64_t, int>, SfBatchPtr>& pending, int64_t& next_clock,
                             std::vector<SfBatchPtr>& group);
  void submit_start_snapshot();
  void maybe_snapshot(int64_t& next_eval, int64_t& next_ckpt, bool final);
  void maybe_sketch();
  bool reconcile(int64_t clock);

  WorkerState& s_;
  std::unique_ptr<UpdateApplier> applier_;
  std::vector<const SfBatch*> apply_raw_;  // reused by apply()
  std::vector<float> apply_alpha_;         // per batch multiplier 1 / scale
  std::vector<int64_t> pairs_applied_from_;
  std::unique_ptr<DriftSketcher> sketcher_;
  std::unique_ptr<Reconciler> reconciler_;  // partial broadcast only
  int64_t next_drift_ = 0;                  // the next clock a drift sketch is due
};

}  // namespace sfb::runtime
