// The worker's update thread: applies SF batches (or a baseline's dense items) to W under the
// exclusive lock, in sender-rank order per clock under BSP, and hands rank 0's monitor the
// snapshots it evaluates and checkpoints.
#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/runtime/worker_state.h"

namespace sfb::runtime {

void Worker::State::apply(std::span<const SfBatchPtr> batches) {
  if (batches.empty()) return;
  std::vector<const SfBatch*>& raw = apply_raw;
  raw.clear();
  for (const auto& b : batches) raw.push_back(b.get());
  Stopwatch sw;
  {
    auto w = weights.write();
    if (!scaling_prox) {
      // One sweep over W for all of them (update_applier.h), then each batch's proximal step.
      applier->apply(w.stored(), raw);
      if (model.has_prox())
        for (const SfBatch* b : raw)
          if (b->count > 0) model.prox(w.view(), step(b->clock));  // a clock marker is no step
    } else {
      apply_scaled(w, raw);
    }
  }
  update_ns += to_ns(sw.seconds());
  count_applied(raw);
}

// W_true = scale * stored. Batch b adds dW_b, then shrinks by c_b = prox_scale(eta_b):
// stored += dW_b / scale; scale *= c_b. All batches still go in one sweep, each with its own
// multiplier; stored is rescaled only when the scale drifts far from 1 (rarely), so a prox step is
// O(1).
void Worker::State::apply_scaled(SharedWeights::Writer& w, std::span<const SfBatch* const> raw) {
  apply_alpha.clear();
  float s = w.scale();
  for (const SfBatch* b : raw) {
    apply_alpha.push_back(1.0f / s);
    if (b->count > 0) s *= static_cast<float>(model.prox_scale(step(b->clock)));
  }
  applier->apply(w.stored(), raw, apply_alpha);
  w.set_scale(s);
  w.fold_scale_if_far();
  if (model.has_prox()) {
    w.fold_scale();
    for (const SfBatch* b : raw)
      if (b->count > 0) model.prox(w.view(), step(b->clock));
  }
}

void Worker::State::count_applied(std::span<const SfBatch* const> raw) {
  for (const SfBatch* b : raw) pairs_applied_from[static_cast<size_t>(b->sender)] += b->count;
  gate->applied(raw);
}

// A baseline's row block (exchange.h), in the stored layout. A clock's kSum blocks all add with the
// same 1 / scale; its proximal step and the scale's shrinkage follow its last block, as SFB applies
// them after the clock's batches.
void Worker::State::apply_dense(const DenseUpdate& item) {
  SFB_ENFORCE(
      item.kind == DenseUpdate::Kind::kOwn ||
          (item.block && item.block->rows() >= item.rows && item.block->cols() == weights.stored_unlocked().cols() &&
           item.row_begin >= 0 && item.row_begin + item.rows <= weights.stored_unlocked().rows()),
      "dense item of clock {} rows [{}, +{})", item.clock, item.row_begin, item.rows);
  Stopwatch sw;
  {
    auto w = weights.write();
    auto rows = w.stored().middleRows(item.row_begin, item.rows);
    if (item.kind == DenseUpdate::Kind::kOwn) {
      // Read-my-writes: the raw update, no proximal step (the servers apply it when they apply the
      // update; the next PULL replaces these rows).
      const SfBatch* raw = item.own.get();
      apply_alpha.assign(1, 1.0f / w.scale());
      applier->apply(w.stored(), std::span<const SfBatch* const>(&raw, 1), apply_alpha);
    } else if (item.kind == DenseUpdate::Kind::kReplace) {
      // The parameter servers' rows after every worker's clock item.clock.
      w.fold_scale();
      rows = item.block->topRows(item.rows);
    } else if (!scaling_prox) {
      rows += item.block->topRows(item.rows);
    } else {
      rows += (1.0f / w.scale()) * item.block->topRows(item.rows);
    }
    if (item.kind == DenseUpdate::Kind::kSum && item.last) {
      // One proximal step per worker's batch of the clock (as SFB applies one per batch).
      const double eta = step(item.clock);
      if (scaling_prox) {
        float scale = w.scale();
        for (int q = 0; q < P; ++q) scale *= static_cast<float>(model.prox_scale(eta));
        w.set_scale(scale);
        w.fold_scale_if_far();
      }
      if (model.has_prox()) {
        w.fold_scale();
        for (int q = 0; q < P; ++q) model.prox(w.view(), eta);
      }
    }
  }
  update_ns += to_ns(sw.seconds());
  if (item.kind == DenseUpdate::Kind::kOwn) {
    gate->applied_own_dense(item.clock);
    return;
  }
  if (!item.last) return;
  for (int q : sources) pairs_applied_from[static_cast<size_t>(q)] += K;
  gate->applied_dense(item.clock);
  clock_applied(item.clock);
}

void Worker::State::clock_applied(int64_t clock) {
  if (!hooks.on_clock_applied) return;
  hooks.on_clock_applied(clock, weights.stored_unlocked());  // this thread is the only writer
}

// BSP: applies every clock from next_clock on whose batches from all sources are here, in
// sender-rank order.
void Worker::State::apply_complete_clocks(std::map<std::pair<int64_t, int>, SfBatchPtr>& pending, int64_t& next_clock,
                                          std::vector<SfBatchPtr>& group) {
  for (;;) {
    for (int q : sources)
      if (!pending.count({next_clock, q})) return;
    group.clear();
    for (int q : sources) {
      auto it = pending.find({next_clock, q});
      group.push_back(std::move(it->second));
      pending.erase(it);
    }
    apply(group);
    clock_applied(next_clock);
    ++next_clock;
    if (reconciler && reconciler->due(next_clock) && !reconcile(next_clock)) return;
  }
}

// Partial broadcast: every worker replaces its replica by the consensus (reconciler.h). The drift
// sketch of this clock, when one is due, is of the replicas before (what partial broadcast let
// them become). False when the job is aborting.
bool Worker::State::reconcile(int64_t clock) {
  maybe_sketch();
  Stopwatch sw;
  try {
    auto w = weights.write();
    w.fold_scale();
    reconciler->reconcile(w.stored(), clock);  // element-wise: either layout
    // A sum of prox-feasible replicas may leave the feasible set: one proximal step puts it back.
    if (model.has_prox() && !scaling_prox && reconciler->mode() == Reconciler::Mode::kSum)
      model.prox(w.view(), step(clock - 1));
  } catch (const comm::QueueChannel::Closed&) {
    return false;
  }
  update_ns += to_ns(sw.seconds());
  gate->reconciled(clock);
  return true;
}

// Rank 0 evaluates the starting point too: the first point of every objective-vs-time curve.
void Worker::State::submit_start_snapshot() {
  if (rank != 0 || !monitor) return;
  EvalRequest q;
  q.record.clock = start_clock;
  fill_traffic_and_times(q.record);
  monitor->submit(q);
}

void Worker::State::maybe_snapshot(int64_t& next_eval, int64_t& next_ckpt, bool final) {
  if (rank != 0 || !monitor) return;
  const bool checkpoints = !cfg.checkpoint.path.empty();
  int64_t done = gate->stop_at();
  bool evaluate = true, checkpoint = checkpoints;
  if (!final) {
    done = gate->applied_by_every_source();
    evaluate = done >= next_eval;
    checkpoint = checkpoints && done >= next_ckpt;
    if (!evaluate && !checkpoint) return;
    while (next_eval <= done) next_eval += cfg.eval.every;
    while (checkpoint && next_ckpt <= done) next_ckpt += cfg.checkpoint.every;
  }
  EvalRequest q;
  q.final = final;
  q.evaluate = evaluate;
  q.checkpoint = checkpoint;
  auto& r = q.record;
  r.clock = done;
  r.seconds = since_start.seconds();
  // This run's rate: a resumed run's seconds start at the resume, and so do its clocks.
  r.samples_per_s = r.seconds > 0 ? static_cast<double>(done - start_clock) * P * K / r.seconds : 0.0;
  fill_traffic_and_times(r);
  monitor->submit(q);
}

// Every eval.every clocks applied from every source: a sketch of W for the replica drift, labelled
// with the last multiple of eval.every reached (SSP/ASP may pass several at once).
void Worker::State::maybe_sketch() {
  if (!sketcher) return;
  const int64_t done = gate->applied_by_every_source();
  if (done < next_drift) return;
  const int64_t clock = done / cfg.eval.every * cfg.eval.every;
  next_drift = clock + cfg.eval.every;
  // Of the stored matrix: every replica has the same layout. Only this thread writes W.
  auto s = sketcher->sketch(weights.stored_unlocked(), weights.scale_unlocked());
  std::lock_guard lock(drift_mu);
  drift_out.emplace_back(clock, std::move(s));
}

void Worker::State::update_loop() {
  const bool bsp = cfg.sfb.staleness == 0;
  std::map<std::pair<int64_t, int>, SfBatchPtr> pending;  // BSP: (clock, sender) -> batch
  int64_t next_clock = start_clock;
  int64_t next_eval = (start_clock / cfg.eval.every + 1) * cfg.eval.every;
  int64_t next_ckpt = cfg.checkpoint.every > 0 ? (start_clock / cfg.checkpoint.every + 1) * cfg.checkpoint.every
                                               : std::numeric_limits<int64_t>::max();
  next_drift = next_eval;
  std::vector<SfBatchPtr> group;  // batches applied together
  submit_start_snapshot();
  do {
    UpdateItem item;
    in_q.pop(item);
    if (aborted()) return;
    SfBatchPtr b = std::move(item.sf);
    if (item.dense) {
      apply_dense(*item.dense);
    } else if (!b) {
      continue;  // a wake-up: check for the end
    } else if (!bsp) {
      // SSP/ASP: apply what has arrived, up to one batch per source, in one sweep.
      group.clear();
      group.push_back(std::move(b));
      while (group.size() < sources.size() && in_q.try_pop(item)) {
        // Batches of factors come only under SFB, dense items only from a baseline's exchange.
        SFB_ENFORCE(!item.dense, "rank {}: a dense item among SF batches", rank);
        if (!item.sf) break;  // a wake-up: the termination check below runs anyway
        group.push_back(std::move(item.sf));
      }
      apply(group);
    } else {
      if (!pending.emplace(std::make_pair(b->clock, b->sender), b).second)
        throw CommError(fmt::format("rank {}: duplicate batch of clock {} from rank {}", rank, b->clock, b->sender));
      apply_complete_clocks(pending, next_clock, group);
    }
    maybe_snapshot(next_eval, next_ckpt, false);
    maybe_sketch();
  } while (!gate->all_applied());
  // The run ends on one consensus: the model file and the final objective are every replica's.
  if (const int64_t end = gate->stop_at(); reconciler && reconciler->last() < end && !reconcile(end)) return;
  maybe_snapshot(next_eval, next_ckpt, true);
  gate->update_finished();
}

}  // namespace sfb::runtime
