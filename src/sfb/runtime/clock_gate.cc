#include "sfb/runtime/clock_gate.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/error.h"
#include "sfb/core/timer.h"
#include "sfb/runtime/reconciler.h"

namespace sfb::runtime {

ClockGate::ClockGate(Rule rule, int64_t start_clock, int64_t stop_at)
    : rule_(std::move(rule)),
      applied_(static_cast<size_t>(rule_.workers), start_clock),
      received_(static_cast<size_t>(rule_.workers), start_clock),
      own_applied_(start_clock),
      stop_at_(stop_at),
      started_(start_clock),
      reconciled_(start_clock) {}

bool ClockGate::allowed(int64_t c) const {
  if (c >= Reconciler::next_point(reconciled_, rule_.reconcile_every)) return false;
  if (rule_.own_batches && applied_[static_cast<size_t>(rule_.rank)] < c) return false;
  if (rule_.reads_own_writes && own_applied_ < c) return false;
  for (int q : rule_.sources)
    if (applied_[static_cast<size_t>(q)] < c - rule_.bound) return false;
  return true;
}

std::string ClockGate::waiting_for(int64_t c) const {
  if (paused_) return "no STOP_AT from rank 0 after its stop query";
  if (const int64_t point = Reconciler::next_point(reconciled_, rule_.reconcile_every); c >= point)
    return fmt::format("the replica reconciliation at clock {} (every worker takes part)", point);
  std::vector<std::string> late;
  for (int q : rule_.sources) {
    const int64_t need = (q == rule_.rank && rule_.own_batches) ? c : c - rule_.bound;
    // Under BSP complete clocks are applied together: the late ranks are those whose batches
    // have not even arrived.
    if (applied_[static_cast<size_t>(q)] < need && received_[static_cast<size_t>(q)] < need)
      late.push_back(fmt::format("rank {} (received {} of {} clocks)", q, received_[static_cast<size_t>(q)], need));
  }
  if (late.empty()) return "every batch it needs has arrived but is not applied yet";
  return fmt::format("no progress from {}{}; is it alive?", fmt::join(late, ", "), rule_.via);
}

bool ClockGate::wait_for_clock(int64_t c, double timeout_s, double* waited_s) {
  std::unique_lock lock(mu_);
  Stopwatch waited;
  auto ready = [&] { return aborted_ || c >= stop_at_ || (!paused_ && allowed(c)); };
  const auto deadline = deadline_after(timeout_s);
  while (!ready()) {
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !ready())
      throw CommError(fmt::format("rank {}: waited {} s (runtime.peer_timeout_s) to start clock {}: {}", rule_.rank,
                                  timeout_s, c, waiting_for(c)));
  }
  *waited_s += waited.seconds();
  if (aborted_) return false;
  if (c >= stop_at_) {
    compute_done_ = true;
    return false;
  }
  started_ = c + 1;
  for (int q : rule_.sources) max_lead_ = std::max(max_lead_, c - applied_[static_cast<size_t>(q)]);
  return true;
}

void ClockGate::own_committed() {
  std::lock_guard lock(mu_);
  ++received_[static_cast<size_t>(rule_.rank)];
}

int64_t ClockGate::max_lead() const {
  std::lock_guard lock(mu_);
  return max_lead_;
}

void ClockGate::received(int src, int64_t clock) {
  // FIFO per sender: a clock out of order means a lost or duplicated message.
  std::lock_guard lock(mu_);
  if (clock != received_[static_cast<size_t>(src)])
    throw CommError(
        fmt::format("rank {}: SF batch of clock {} from rank {}, expected clock {}: a message was lost or "
                    "duplicated",
                    rule_.rank, clock, src, received_[static_cast<size_t>(src)]));
  ++received_[static_cast<size_t>(src)];
}

int64_t ClockGate::pause() {
  std::lock_guard lock(mu_);
  paused_ = true;
  return started_;
}

void ClockGate::resume(int64_t at) {
  std::lock_guard lock(mu_);
  if (at < started_)
    throw CommError(fmt::format("rank {}: STOP_AT {} is before clock {} already started", rule_.rank, at, started_));
  stop_at_ = std::min(stop_at_, at);
  paused_ = false;
  cv_.notify_all();
}

bool ClockGate::done() const {
  std::lock_guard lock(mu_);
  return compute_done_ && update_done_;
}

void ClockGate::applied(std::span<const SfBatch* const> batches) {
  std::lock_guard lock(mu_);
  for (const SfBatch* b : batches) {
    // Batches of one sender arrive in clock order (FIFO transport, one sender thread): a gap or
    // a repeat means a lost or duplicated message.
    auto& n = applied_[static_cast<size_t>(b->sender)];
    if (b->clock != n)
      throw CommError(fmt::format("rank {}: batch of clock {} from rank {} out of sequence (expected clock {})",
                                  rule_.rank, b->clock, b->sender, n));
    ++n;
  }
  cv_.notify_all();
}

void ClockGate::applied_own_dense(int64_t clock) {
  std::lock_guard lock(mu_);
  if (clock != own_applied_)
    throw CommError(fmt::format("rank {}: own {} update of clock {} out of sequence (expected clock {})", rule_.rank,
                                rule_.exchange, clock, own_applied_));
  ++own_applied_;
  cv_.notify_all();
}

void ClockGate::applied_dense(int64_t clock) {
  std::lock_guard lock(mu_);
  for (int q : rule_.sources) {
    auto& n = applied_[static_cast<size_t>(q)];
    if (n != clock)
      throw CommError(fmt::format("rank {}: {} update of clock {} out of sequence (expected clock {})", rule_.rank,
                                  rule_.exchange.empty() ? "dense" : rule_.exchange, clock, n));
    n = clock + 1;
  }
  cv_.notify_all();
}

void ClockGate::reconciled(int64_t clock) {
  std::lock_guard lock(mu_);
  reconciled_ = clock;
  cv_.notify_all();
}

int64_t ClockGate::applied_by_every_source_locked() const {
  int64_t done = std::numeric_limits<int64_t>::max();
  for (int q : rule_.sources) done = std::min(done, applied_[static_cast<size_t>(q)]);
  return done;
}

int64_t ClockGate::applied_by_every_source() const {
  std::lock_guard lock(mu_);
  return applied_by_every_source_locked();
}

bool ClockGate::all_applied() const {
  std::lock_guard lock(mu_);
  return compute_done_ && applied_by_every_source_locked() >= stop_at_;
}

void ClockGate::update_finished() {
  std::lock_guard lock(mu_);
  update_done_ = true;
}

int64_t ClockGate::stop_at() const {
  std::lock_guard lock(mu_);
  return stop_at_;
}

void ClockGate::abort() {
  std::lock_guard lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

}  // namespace sfb::runtime
