#include "sfb/runtime/objective_monitor.h"

#include <cmath>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "sfb/io/checkpoint.h"

namespace sfb::runtime {

ObjectiveMonitor::ObjectiveMonitor(const Config& cfg, const api::Model& model, const io::Dataset& train,
                                   const io::Dataset* test, int world_size)
    : cfg_(cfg), model_(model), train_(train), test_(test), world_size_(world_size) {
  if (!cfg.output.dir.empty() && (!cfg.output.metrics.empty() || !cfg.checkpoint.path.empty()))
    std::filesystem::create_directories(cfg.output.dir);
  if (!cfg.output.metrics.empty()) {
    metrics_.open((std::filesystem::path(cfg.output.dir) / cfg.output.metrics).string());
  }
  queue_.set_capacity(4);
}

ObjectiveMonitor::~ObjectiveMonitor() {
  if (thread_.joinable()) {
    abort();
    thread_.join();
  }
}

void ObjectiveMonitor::start() { thread_ = std::thread([this] { loop(); }); }

void ObjectiveMonitor::submit(std::unique_ptr<Snapshot> s) { queue_.push(s.release()); }

void ObjectiveMonitor::abort() {
  // abort() wakes a monitor blocked in pop now; the null snapshot one that pops later.
  queue_.abort();
  queue_.try_push(nullptr);
}

void ObjectiveMonitor::finish() {
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

std::string ObjectiveMonitor::stop_reason() const {
  std::lock_guard lock(mu_);
  return stop_reason_;
}

std::vector<EvalRecord> ObjectiveMonitor::records() const {
  std::lock_guard lock(mu_);
  return records_;
}

EvalRecord ObjectiveMonitor::evaluate(const Snapshot& s) {
  EvalRecord r = s.record;
  r.objective = model_.objective(s.W, train_, cfg_.eval.train_sample);
  r.accuracy = (test_ && test_->n > 0) ? model_.accuracy(s.W, *test_) : -1.0;
  r.extra = model_.metrics(s.W, train_, cfg_.eval.train_sample, test_ && test_->n > 0 ? test_ : nullptr);
  return r;
}

void ObjectiveMonitor::decide(const EvalRecord& r) {
  std::lock_guard lock(mu_);
  const double prev = records_.size() >= 2 ? records_[records_.size() - 2].objective : NAN;
  if (!stop_reason_.empty()) return;
  if (!std::isfinite(r.objective)) {
    stop_reason_ = "diverged";
  } else if (cfg_.stop.target_accuracy > 0 && r.accuracy >= cfg_.stop.target_accuracy) {
    stop_reason_ = "target_accuracy";
  } else if (cfg_.stop.target_objective > 0 && r.objective <= cfg_.stop.target_objective) {
    stop_reason_ = "target_objective";
  } else if (cfg_.stop.rel_tol > 0 && std::isfinite(prev)) {
    const double rel = std::abs(prev - r.objective) / std::max(std::abs(prev), 1e-12);
    below_tol_ = rel < cfg_.stop.rel_tol ? below_tol_ + 1 : 0;
    if (below_tol_ >= cfg_.stop.patience) stop_reason_ = "converged";
  }
}

void ObjectiveMonitor::write_checkpoint(const Snapshot& s) {
  const std::string path = (std::filesystem::path(cfg_.output.dir) / cfg_.checkpoint.path).string();
  io::write_checkpoint(path, {cfg_.model_fingerprint(), cfg_.job.seed, s.record.clock, world_size_, s.W});
  spdlog::info("checkpoint at clock {} written to {}", s.record.clock, path);
}

void ObjectiveMonitor::loop() {
  try {
    for (;;) {
      Snapshot* raw = nullptr;
      queue_.pop(raw);
      if (!raw) return;  // aborted
      std::unique_ptr<Snapshot> s(raw);
      if (s->checkpoint) write_checkpoint(*s);
      if (!s->evaluate) continue;
      EvalRecord r;
      bool repeat = false;
      {
        std::lock_guard lock(mu_);
        repeat = s->final && !records_.empty() && records_.back().clock == s->record.clock;
        if (repeat) r = records_.back();
      }
      if (!repeat) {
        r = evaluate(*s);
        {
          std::lock_guard lock(mu_);
          records_.push_back(r);
        }
        if (metrics_.is_open()) metrics_.write(to_json(r));
        const double per_clock = r.clock > 0 ? r.seconds / static_cast<double>(r.clock) : 0.0;
        const double eta = per_clock * static_cast<double>(std::max<int64_t>(0, cfg_.stop.max_clocks - r.clock));
        std::string extra;
        for (const auto& [k, v] : r.extra) extra += fmt::format(" | {} {:.4g}", k, v);
        spdlog::info("clock {:>6}/{} | objective {:.5f} | test acc {}{} | {:>9.0f} samples/s | sent {:.2f} MB | ETA {:.1f}s",
                     r.clock, cfg_.stop.max_clocks, r.objective,
                     r.accuracy >= 0 ? fmt::format("{:.2f}%", 100.0 * r.accuracy) : std::string("n/a"), extra,
                     r.samples_per_s, static_cast<double>(r.bytes_sent) / 1e6, eta);
        decide(r);
      }
      if (s->final) return;
    }
  } catch (const tbb::user_abort&) {
    // Training failed elsewhere; the error that caused it is reported by its own thread.
  } catch (...) {
    std::lock_guard lock(mu_);
    error_ = std::current_exception();
    stop_reason_ = "error";
  }
}

}  // namespace sfb::runtime
