// The worker's update thread: applies SF batches (or a baseline's dense items) to W under the
// exclusive lock, in sender-rank order per clock under BSP, reconciles partial broadcast's
// replicas, sketches W for the replica drift, and hands rank 0's monitor the clocks it evaluates
// and checkpoints.
#include "sfb/runtime/update_thread.h"

#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/runtime/job_rules.h"

namespace sfb::runtime {

UpdateThread::UpdateThread(WorkerState& s) : s_(s) {
  applier_ =
      std::make_unique<UpdateApplier>(std::max<int>(1, static_cast<int>(s.cfg.runtime.threads)), s.weights.layout());
  pairs_applied_from_.assign(static_cast<size_t>(s.P), 0);
  sketcher_ = std::make_unique<DriftSketcher>(s.weights.stored_unlocked().rows(), s.weights.stored_unlocked().cols(),
                                              s.cfg.job.seed);
  if (s.reconcile_ch) {
    const auto mode = reconcile_mode(s.cfg);
    reconciler_ =
        std::make_unique<Reconciler>(*s.reconcile_ch, s.P, s.topo.receivers_per_clock() + 1,
                                     *mode == Reconcile::kSum ? Reconciler::Mode::kSum : Reconciler::Mode::kMean,
                                     s.reconcile_every, s.start_clock, s.weights.stored_unlocked());
  }
}

void UpdateThread::apply(std::span<const SfBatchPtr> batches) {
  if (batches.empty()) return;
  std::vector<const SfBatch*>& raw = apply_raw_;
  raw.clear();
  for (const auto& b : batches) raw.push_back(b.get());
  Stopwatch sw;
  {
    auto w = s_.weights.write();
    if (!s_.scaling_prox) {
      // One sweep over W for all of them (update_applier.h), then each batch's proximal step.
      applier_->apply(w.stored(), raw);
      if (s_.model.has_prox())
        for (const SfBatch* b : raw)
          if (b->count > 0) s_.model.prox(w.view(), s_.step(b->clock));  // a clock marker is no step
    } else {
      apply_scaled(w, raw);
    }
  }
  s_.update_ns += to_ns(sw.seconds());
  count_applied(raw);
}

// W_true = scale * stored. Batch b adds dW_b, then shrinks by c_b = prox_scale(eta_b):
// stored += dW_b / scale; scale *= c_b. All batches still go in one sweep, each with its own
// multiplier; stored is rescaled only when the scale drifts far from 1 (rarely), so a prox step is
// O(1).
void UpdateThread::apply_scaled(SharedWeights::Writer& w, std::span<const SfBatch* const> raw) {
  apply_alpha_.clear();
  float s = w.scale();
  for (const SfBatch* b : raw) {
    apply_alpha_.push_back(1.0f / s);
    if (b->count > 0) s *= static_cast<float>(s_.model.prox_scale(s_.step(b->clock)));
  }
  applier_->apply(w.stored(), raw, apply_alpha_);
  w.set_scale(s);
  w.fold_scale_if_far();
  if (s_.model.has_prox()) {
    w.fold_scale();
    for (const SfBatch* b : raw)
      if (b->count > 0) s_.model.prox(w.view(), s_.step(b->clock));
  }
}

void UpdateThread::count_applied(std::span<const SfBatch* const> raw) {
  for (const SfBatch* b : raw) pairs_applied_from_[static_cast<size_t>(b->sender)] += b->count;
  s_.gate->applied(raw);
}

// A baseline's row block (exchange.h), in the stored layout. A clock's kSum blocks all add with the
// same 1 / scale; its proximal step and the scale's shrinkage follow its last block, as SFB applies
// them after the clock's batches.
void UpdateThread::apply_dense(const DenseUpdate& item) {
  SFB_ENFORCE(
      item.kind == DenseUpdate::Kind::kOwn ||
          (item.block && item.block->rows() >= item.rows && item.block->cols() == s_.weights.stored_unlocked().cols() &&
           item.row_begin >= 0 && item.row_begin + item.rows <= s_.weights.stored_unlocked().rows()),
      "dense item of clock {} rows [{}, +{})", item.clock, item.row_begin, item.rows);
  Stopwatch sw;
  {
    auto w = s_.weights.write();
    auto rows = w.stored().middleRows(item.row_begin, item.rows);
    if (item.kind == DenseUpdate::Kind::kOwn) {
      // Read-my-writes: the raw update, no proximal step (the servers apply it when they apply the
      // update; the next PULL replaces these rows).
      const SfBatch* raw = item.own.get();
      apply_alpha_.assign(1, 1.0f / w.scale());
      applier_->apply(w.stored(), std::span<const SfBatch* const>(&raw, 1), apply_alpha_);
    } else if (item.kind == DenseUpdate::Kind::kReplace) {
      // The parameter servers' rows after every worker's clock item.clock.
      w.fold_scale();
      rows = item.block->topRows(item.rows);
    } else if (!s_.scaling_prox) {
      rows += item.block->topRows(item.rows);
    } else {
      rows += (1.0f / w.scale()) * item.block->topRows(item.rows);
    }
    if (item.kind == DenseUpdate::Kind::kSum && item.last) {
      // One proximal step per worker's batch of the clock (as SFB applies one per batch).
      const double eta = s_.step(item.clock);
      if (s_.scaling_prox) {
        float scale = w.scale();
        for (int q = 0; q < s_.P; ++q) scale *= static_cast<float>(s_.model.prox_scale(eta));
        w.set_scale(scale);
        w.fold_scale_if_far();
      }
      if (s_.model.has_prox()) {
        w.fold_scale();
        for (int q = 0; q < s_.P; ++q) s_.model.prox(w.view(), eta);
      }
    }
  }
  s_.update_ns += to_ns(sw.seconds());
  if (item.kind == DenseUpdate::Kind::kOwn) {
    s_.gate->applied_own_dense(item.clock);
    return;
  }
  if (!item.last) return;
  for (int q : s_.sources) pairs_applied_from_[static_cast<size_t>(q)] += s_.K;
  s_.gate->applied_dense(item.clock);
  clock_applied(item.clock);
}

void UpdateThread::clock_applied(int64_t clock) {
  if (!s_.hooks.on_clock_applied) return;
  s_.hooks.on_clock_applied(clock, s_.weights.stored_unlocked());  // this thread is the only writer
}

// BSP: applies every clock from next_clock on whose batches from all sources are here, in
// sender-rank order.
void UpdateThread::apply_complete_clocks(std::map<std::pair<int64_t, int>, SfBatchPtr>& pending, int64_t& next_clock,
                                         std::vector<SfBatchPtr>& group) {
  for (;;) {
    for (int q : s_.sources)
      if (!pending.count({next_clock, q})) return;
    group.clear();
    for (int q : s_.sources) {
      auto it = pending.find({next_clock, q});
      group.push_back(std::move(it->second));
      pending.erase(it);
    }
    apply(group);
    clock_applied(next_clock);
    ++next_clock;
    if (reconciler_ && reconciler_->due(next_clock) && !reconcile(next_clock)) return;
  }
}

// Partial broadcast: every worker replaces its replica by the consensus (reconciler.h). The drift
// sketch of this clock, when one is due, is of the replicas before (what partial broadcast let
// them become). False when the job is aborting.
bool UpdateThread::reconcile(int64_t clock) {
  maybe_sketch();
  Stopwatch sw;
  try {
    auto w = s_.weights.write();
    w.fold_scale();
    reconciler_->reconcile(w.stored(), clock);  // element-wise: either layout
    // A sum of prox-feasible replicas may leave the feasible set: one proximal step puts it back.
    if (s_.model.has_prox() && !s_.scaling_prox && reconciler_->mode() == Reconciler::Mode::kSum)
      s_.model.prox(w.view(), s_.step(clock - 1));
  } catch (const comm::QueueChannel::Closed&) {
    return false;
  }
  s_.update_ns += to_ns(sw.seconds());
  s_.gate->reconciled(clock);
  return true;
}

// Rank 0 evaluates the starting point too: the first point of every objective-vs-time curve.
void UpdateThread::submit_start_snapshot() {
  if (s_.rank != 0 || !s_.monitor || !s_.evaluate_ends) return;
  EvalRequest q;
  q.record.clock = s_.start_clock;
  s_.fill_traffic_and_times(q.record);
  s_.monitor->submit(q);
}

void UpdateThread::maybe_snapshot(int64_t& next_eval, int64_t& next_ckpt, bool final) {
  if (s_.rank != 0 || !s_.monitor) return;
  const bool checkpoints = !s_.cfg.checkpoint.path.empty();
  int64_t done = s_.gate->stop_at();
  bool evaluate = s_.evaluate_ends, checkpoint = checkpoints;
  if (!final) {
    done = s_.gate->applied_by_every_source();
    evaluate = done >= next_eval;
    checkpoint = checkpoints && done >= next_ckpt;
    if (!evaluate && !checkpoint) return;
    while (next_eval <= done) next_eval += s_.cfg.eval.every;
    while (checkpoint && next_ckpt <= done) next_ckpt += s_.cfg.checkpoint.every;
  }
  EvalRequest q;
  q.final = final;
  q.evaluate = evaluate;
  q.checkpoint = checkpoint;
  auto& r = q.record;
  r.clock = done;
  r.seconds = s_.since_start.seconds();
  // This run's rate: a resumed run's seconds start at the resume, and so do its clocks.
  r.samples_per_s = r.seconds > 0 ? static_cast<double>(done - s_.start_clock) * s_.P * s_.K / r.seconds : 0.0;
  s_.fill_traffic_and_times(r);
  s_.monitor->submit(q);
}

// Every eval.every clocks applied from every source: a sketch of W for the replica drift, labelled
// with the last multiple of eval.every reached (SSP/ASP may pass several at once).
void UpdateThread::maybe_sketch() {
  if (!sketcher_) return;
  const int64_t done = s_.gate->applied_by_every_source();
  if (done < next_drift_) return;
  const int64_t clock = done / s_.cfg.eval.every * s_.cfg.eval.every;
  next_drift_ = clock + s_.cfg.eval.every;
  // Of the stored matrix: every replica has the same layout. Only this thread writes W.
  auto s = sketcher_->sketch(s_.weights.stored_unlocked(), s_.weights.scale_unlocked());
  {
    std::lock_guard lock(s_.drift_mu);
    s_.drift_out.emplace_back(clock, std::move(s));
  }
  s_.t.wake();  // the communication thread sends it
}

void UpdateThread::run() {
  const bool bsp = s_.cfg.sfb.staleness == 0;
  std::map<std::pair<int64_t, int>, SfBatchPtr> pending;  // BSP: (clock, sender) -> batch
  int64_t next_clock = s_.start_clock;
  int64_t next_eval = (s_.start_clock / s_.cfg.eval.every + 1) * s_.cfg.eval.every;
  int64_t next_ckpt = s_.cfg.checkpoint.every > 0
                          ? (s_.start_clock / s_.cfg.checkpoint.every + 1) * s_.cfg.checkpoint.every
                          : std::numeric_limits<int64_t>::max();
  next_drift_ = next_eval;
  std::vector<SfBatchPtr> group;  // batches applied together
  submit_start_snapshot();
  do {
    UpdateItem item;
    s_.in_q.pop(item);
    if (s_.aborted()) return;
    SfBatchPtr b = std::move(item.sf);
    if (item.dense) {
      apply_dense(*item.dense);
    } else if (!b) {
      continue;  // a wake-up: check for the end
    } else if (!bsp) {
      // SSP/ASP: apply what has arrived, up to one batch per source, in one sweep.
      group.clear();
      group.push_back(std::move(b));
      while (group.size() < s_.sources.size() && s_.in_q.try_pop(item)) {
        // Batches of factors come only under SFB, dense items only from a baseline's exchange.
        SFB_ENFORCE(!item.dense, "rank {}: a dense item among SF batches", s_.rank);
        if (!item.sf) break;  // a wake-up: the termination check below runs anyway
        group.push_back(std::move(item.sf));
      }
      apply(group);
    } else {
      if (!pending.emplace(std::make_pair(b->clock, b->sender), b).second)
        throw CommError(fmt::format("rank {}: duplicate batch of clock {} from rank {}", s_.rank, b->clock, b->sender));
      apply_complete_clocks(pending, next_clock, group);
    }
    maybe_snapshot(next_eval, next_ckpt, false);
    maybe_sketch();
  } while (!s_.gate->all_applied());
  // The run ends on one consensus: the model file and the final objective are every replica's.
  if (const int64_t end = s_.gate->stop_at(); reconciler_ && reconciler_->last() < end && !reconcile(end)) return;
  maybe_snapshot(next_eval, next_ckpt, true);
  s_.gate->update_finished();
  s_.t.wake();  // everything is applied: the communication thread may report it
}

}  // namespace sfb::runtime
