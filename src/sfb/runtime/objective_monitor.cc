#include "sfb/runtime/objective_monitor.h"

#include <cmath>
#include <limits>

#include <spdlog/spdlog.h>

#include "sfb/core/files.h"
#include "sfb/io/checkpoint.h"

namespace sfb::runtime {

ObjectiveMonitor::ObjectiveMonitor(const EvalConfig& eval, const StopConfig& stop, MonitorOutputs out,
                                   const api::Model& model, const io::Dataset& train, const io::Dataset* test,
                                   const SharedWeights& weights, bool snapshot)
    : eval_(eval),
      stop_(stop),
      out_(std::move(out)),
      model_(model),
      train_(train),
      test_(test),
      weights_(weights),
      snapshot_(snapshot),
      rule_(stop) {
  for (const auto* path : {&out_.metrics, &out_.checkpoint})
    if (!path->empty()) create_parent_directories(*path);
  if (!out_.metrics.empty()) {
    if (out_.continue_from >= 0)
      metrics_.open_continuing(out_.metrics, out_.continue_from);
    else
      metrics_.open(out_.metrics);
  }
  thread_.on_abort([this] {
    // Wakes the monitor waiting for a request and an update thread waiting in submit().
    std::lock_guard lock(hand_mu_);
    aborted_ = true;
    hand_cv_.notify_all();
  });
}

ObjectiveMonitor::~ObjectiveMonitor() = default;

void ObjectiveMonitor::start() {
  thread_.spawn([this] { loop(); });
}

void ObjectiveMonitor::submit(const EvalRequest& r) {
  std::unique_lock lock(hand_mu_);
  hand_cv_.wait(lock, [this] { return aborted_ || (!pending_ && !busy_); });
  if (aborted_) return;
  // The update thread is W's only writer: W does not change during this copy. A request that
  // neither evaluates nor checkpoints (the end of a run that evaluates no ends) needs none.
  if (snapshot_ && needs_weights(r)) weights_.copy_materialized(snap_);
  pending_ = r;
  const int64_t seq = ++submitted_;
  hand_cv_.notify_all();
  if (!snapshot_) hand_cv_.wait(lock, [this, seq] { return aborted_ || acquired_ >= seq; });
}

void ObjectiveMonitor::abort() { thread_.abort(); }

void ObjectiveMonitor::finish() {
  try {
    thread_.join();
  } catch (...) {
    std::lock_guard lock(mu_);
    stop_reason_ = StopReason::kError;
    throw;
  }
}

std::optional<StopReason> ObjectiveMonitor::stop_reason() const {
  std::lock_guard lock(mu_);
  if (!stop_reason_ && thread_.error()) return StopReason::kError;
  return stop_reason_;
}

int64_t ObjectiveMonitor::drift_warnings() const {
  std::lock_guard lock(mu_);
  return drift_warnings_;
}

std::vector<EvalRecord> ObjectiveMonitor::records() const {
  std::lock_guard lock(mu_);
  return records_;
}

void ObjectiveMonitor::set_drift(int64_t clock, double drift) {
  std::lock_guard lock(mu_);
  if (clock <= drift_clock_) return;
  drift_clock_ = clock;
  drift_ = drift;
}

EvalRecord ObjectiveMonitor::evaluate(const EvalRecord& base, const View& w) {
  EvalRecord r = base;
  {
    std::lock_guard lock(mu_);
    r.replica_drift = drift_;
    r.replica_drift_clock = drift_clock_;
  }
  if (!w.finite) {
    // The model is never asked to evaluate non-finite weights (its sorts and loops need not
    // expect NaN): the run has diverged.
    r.objective = std::numeric_limits<double>::quiet_NaN();
    r.accuracy = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  r.objective = model_.objective(w.weights, train_, eval_.train_sample);
  r.accuracy = (test_ && test_->n > 0) ? model_.accuracy(w.weights, *test_) : -1.0;
  r.extra = model_.metrics(w.weights, train_, eval_.train_sample, test_ && test_->n > 0 ? test_ : nullptr);
  return r;
}

// Diverged: the objective is not finite (W itself may not be), or it exceeds
// stop.divergence_factor times its starting value.
void ObjectiveMonitor::decide() {
  std::lock_guard lock(mu_);
  if (!stop_reason_) stop_reason_ = rule_.decide(records_);
}

// A checkpoint that cannot be written (full disk, I/O error, read-only file system) loses nothing:
// the previous one stays whole under its name (the file is written to a temporary and renamed),
// training goes on and the next checkpoint tries again.
void ObjectiveMonitor::checkpoint_failed(int64_t clock, const Error& e) const {
  spdlog::error("checkpoint at clock {} not written: {}; {}; training continues", clock, e.what(),
                last_checkpoint_ >= 0 ? fmt::format("{} keeps clock {}", out_.checkpoint, last_checkpoint_)
                                      : std::string("this run has written no checkpoint yet"));
}

void ObjectiveMonitor::write_checkpoint(int64_t clock, const View& w) {
  try {
    // Files hold W in row-major order whatever the layout: streamed in row blocks (transposed a
    // block at a time here, on the monitor), never copied whole. The fsync and rename come in
    // commit_checkpoint(), after the monitor has let go of W.
    ckpt_writer_ = io::begin_checkpoint(
        out_.checkpoint, {out_.model_fingerprint, out_.seed, clock, out_.ranks, 0, 0, out_.lr}, w.file_order);
    pending_clock_ = clock;
  } catch (const Error& e) {
    checkpoint_failed(clock, e);
  }
}

void ObjectiveMonitor::commit_checkpoint() {
  if (!ckpt_writer_) return;
  const auto writer = std::move(ckpt_writer_);
  try {
    writer->commit();
  } catch (const Error& e) {
    checkpoint_failed(pending_clock_, e);
    return;
  }
  last_checkpoint_ = pending_clock_;
  spdlog::info("checkpoint at clock {} written to {}", pending_clock_, out_.checkpoint);
}

std::string duality_gap_stall(const std::vector<EvalRecord>& records) {
  std::vector<std::pair<int64_t, double>> gaps;
  for (const auto& r : records)
    for (const auto& [k, v] : r.extra)
      if (k == "duality_gap" && std::isfinite(v)) gaps.emplace_back(r.clock, v);
  if (gaps.size() < 6) return {};
  const auto [c0, g0] = gaps[gaps.size() - 6];
  const auto [c1, g1] = gaps.back();
  if (g1 <= 1e-3) return {};
  if (g1 >= 0.99 * g0)
    return fmt::format(
        "the duality gap {:.4g} at clock {} is not below its {:.4g} of clock {}: SDCA has stopped converging; {} "
        "model.sdca_sigma (the damping of its dual steps)",
        g1, c1, g0, c0, g1 > g0 ? "it grows: raise" : "it creeps: lower");
  // Shrinking, but at a pace that would need more than ten times the clocks trained so far to reach
  // 1% of the objective: a run that ends there has hardly learned (over-damped dual steps).
  const double target = 0.01 * std::max(std::abs(records.back().objective), 1e-3);
  if (g1 <= target || c1 <= c0) return {};
  const double per_clock = std::log(g0 / g1) / static_cast<double>(c1 - c0);
  const double needed = std::log(g1 / target) / per_clock;
  if (needed <= 10.0 * static_cast<double>(c1 - gaps.front().first)) return {};
  return fmt::format(
      "the duality gap {:.4g} at clock {} fell only from {:.4g} at clock {}: at that pace about {:.3g} more clocks "
      "would bring it to 1% of the objective ({:.4g}); SDCA converges too slowly: lower model.sdca_sigma (the "
      "damping of its dual steps) or train longer",
      g1, c1, g0, c0, needed, records.back().objective);
}

std::string ObjectiveMonitor::convergence_warning() const {
  std::lock_guard lock(mu_);
  return convergence_warning_;
}

bool ObjectiveMonitor::drift_too_far(const EvalRecord& r) const {
  return eval_.drift_warn > 0 && r.replica_drift_clock >= 0 && r.replica_drift > eval_.drift_warn;
}

void ObjectiveMonitor::log_progress(const EvalRecord& r) const {
  const double per_clock = r.clock > 0 ? r.seconds / static_cast<double>(r.clock) : 0.0;
  const double eta = per_clock * static_cast<double>(std::max<int64_t>(0, stop_.max_clocks - r.clock));
  std::string extra;
  for (const auto& [k, v] : r.extra) extra += fmt::format(" | {} {:.4g}", k, v);
  const bool drifted = drift_too_far(r);
  if (r.replica_drift_clock >= 0)
    extra += fmt::format(" | {} {:.3g}{}", drifted ? "DRIFT" : "drift", r.replica_drift,
                         drifted ? fmt::format(" > eval.drift_warn {}", eval_.drift_warn) : std::string());
  spdlog::log(drifted ? spdlog::level::warn : spdlog::level::info,
              "clock {:>6}/{} | objective {:.5f} | test acc {}{} | {:>9.0f} samples/s | sent {:.2f} MB | ETA {:.1f}s",
              r.clock, stop_.max_clocks, r.objective,
              r.accuracy >= 0 ? fmt::format("{:.2f}%", 100.0 * r.accuracy) : std::string("n/a"), extra, r.samples_per_s,
              static_cast<double>(r.bytes_sent) / 1e6, eta);
}

// A checkpoint replaces the previous one only when its weights were judged: finite, evaluated at
// that clock (an evaluation of its own when the clock is not an evaluation point), not diverged,
// the replicas not apart past stop.max_replica_drift, and no earlier judgement that stopped the
// run as bad. `r` is the evaluation at the snapshot's clock.
void ObjectiveMonitor::checkpoint_if_good(int64_t clock, const View& w, const EvalRecord& r) {
  std::string why;
  {
    std::lock_guard lock(mu_);
    if (stop_reason_ && is_failure(*stop_reason_))
      why = fmt::format("the run stopped as \"{}\"", to_string(*stop_reason_));
    else if (!w.finite)
      why = "W has non-finite values";
    else if (rule_.diverged(r, records_))
      why = fmt::format("the objective there, {}, diverged", r.objective);
    else if (stop_.max_replica_drift > 0 && r.replica_drift_clock >= 0 && r.replica_drift > stop_.max_replica_drift)
      why = fmt::format("the replicas drifted apart ({} > stop.max_replica_drift)", r.replica_drift);
  }
  if (why.empty()) return write_checkpoint(clock, w);
  spdlog::error("checkpoint at clock {} not written: {}; {}", clock, why,
                last_checkpoint_ >= 0 ? fmt::format("{} keeps clock {}", out_.checkpoint, last_checkpoint_)
                                      : std::string("no checkpoint of this run was written"));
}

void ObjectiveMonitor::loop() {
  for (;;) {
    EvalRequest q;
    {
      std::unique_lock lock(hand_mu_);
      hand_cv_.wait(lock, [this] { return aborted_ || pending_; });
      if (aborted_) return;
      q = *pending_;
      pending_.reset();
      busy_ = true;
    }
    if (!needs_weights(q)) {
      // Nothing to do with W (the end of a run that evaluates no ends): no view of it.
      std::lock_guard lock(hand_mu_);
      ++acquired_;
      hand_cv_.notify_all();
    } else if (snapshot_) {
      handle(q,
             {api::Weights{snap_, 1.0f, weights_.layout()}, row_source(snap_, weights_.layout()), snap_.allFinite()});
    } else {
      const auto reader = weights_.read();
      {
        std::lock_guard lock(hand_mu_);
        ++acquired_;
        hand_cv_.notify_all();
      }
      handle(q, {reader.weights(), reader.file_order(), reader.all_finite()});
    }
    {
      std::lock_guard lock(hand_mu_);
      busy_ = false;
      hand_cv_.notify_all();
    }
    // W is free again (in place: training goes on) while the disk takes the checkpoint.
    commit_checkpoint();
    if (q.final) return;
  }
}

void ObjectiveMonitor::handle(const EvalRequest& q, const View& w) {
  const bool checkpoint = q.checkpoint && !out_.checkpoint.empty();
  std::optional<EvalRecord> repeat;
  {
    // The final request at the clock of the last evaluation: nothing new to evaluate.
    std::lock_guard lock(mu_);
    if (!records_.empty() && records_.back().clock == q.record.clock) repeat = records_.back();
  }
  // A checkpoint between evaluations is judged by an evaluation of its own (not a metrics line).
  const EvalRecord r = repeat ? *repeat : evaluate(q.record, w);
  if (q.evaluate && !repeat) {
    {
      std::lock_guard lock(mu_);
      records_.push_back(r);
    }
    EvalRecord line = r;  // a resumed run's seconds go on from its predecessors'
    line.attempt_seconds = r.seconds;
    line.seconds = r.seconds + metrics_.continued_seconds();
    metrics_.write_or_stop(to_json(line));  // the metrics are a record: a full disk ends them, not the run
    log_progress(r);
    {
      std::lock_guard lock(mu_);
      if (drift_too_far(r)) ++drift_warnings_;
      if (convergence_warning_.empty()) {
        convergence_warning_ = duality_gap_stall(records_);
        if (!convergence_warning_.empty()) spdlog::warn("{}", convergence_warning_);
      }
    }
    decide();
  }
  if (checkpoint) checkpoint_if_good(q.record.clock, w, r);
}

}  // namespace sfb::runtime
