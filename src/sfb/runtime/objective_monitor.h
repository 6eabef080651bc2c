#pragma once
// Rank 0's objective monitor: a thread that evaluates snapshots of W (taken by the update thread
// once every replica has applied clock c), writes one metrics line and one progress line per
// evaluation, writes checkpoints, and decides whether the job should stop (target accuracy or objective, relative
// change below tolerance for `patience` evaluations, or a diverged objective).
//
// submit() is called by the update thread; stop_reason() by the communication thread. Snapshots
// are owned by the queue: those still queued when the monitor is aborted are freed with it.
#include <atomic>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sfb/api/model.h"
#include "sfb/core/bounded_queue.h"
#include "sfb/core/config.h"
#include "sfb/core/metrics.h"
#include "sfb/core/thread_group.h"

namespace sfb::runtime {

struct Snapshot {
  EvalRecord record;  // everything but objective and accuracy filled in
  Matrix W;           // the true parameters (scale folded in), stored in the model's layout
  bool final = false;
  bool evaluate = true;     // compute the objective and accuracy, write a metrics line
  bool checkpoint = false;  // write it as the checkpoint (checkpoint.path)
};

// Where the monitor writes, and what goes into a checkpoint besides W.
struct MonitorOutputs {
  std::string metrics;     // metrics.jsonl path; "" for none
  std::string checkpoint;  // checkpoint path; "" for none
  uint64_t model_fingerprint = 0;
  uint64_t seed = 0;
  int ranks = 1;  // workers of the job that writes the checkpoints
  // A resumed run (--resume at this clock): metrics.jsonl continues the interrupted run's file
  // from there instead of starting over; -1 for a new run.
  int64_t continue_from = -1;
};

class ObjectiveMonitor {
 public:
  ObjectiveMonitor(const EvalConfig& eval, const StopConfig& stop, MonitorOutputs out, const api::Model& model,
                   const io::Dataset& train, const io::Dataset* test);
  ~ObjectiveMonitor();
  void start();
  // Blocks when the monitor is more than a few snapshots behind (back-pressure).
  void submit(std::unique_ptr<Snapshot> s);
  // Waits for the final snapshot's evaluation; rethrows an evaluation error.
  void finish();
  // Stops the monitor; snapshots still queued are dropped.
  void abort();
  // Snapshots submitted and not yet taken by the monitor thread (tests).
  size_t queued() const;
  // Empty while training should go on.
  std::string stop_reason() const;
  std::vector<EvalRecord> records() const;
  // Evaluations whose replica drift exceeded eval.drift_warn.
  int64_t drift_warnings() const;
  // The replica drift measured at `clock` (communication thread); every later record carries the
  // latest one.
  void set_drift(int64_t clock, double drift);

 private:
  void loop();
  EvalRecord evaluate(const Snapshot& s);
  void write_checkpoint(const Snapshot& s);
  void checkpoint_if_good(const Snapshot& s, const EvalRecord& r);
  void decide(const EvalRecord& r);
  bool diverged(const EvalRecord& r) const;
  void log_progress(const EvalRecord& r) const;
  bool drift_too_far(const EvalRecord& r) const;

  const EvalConfig eval_;
  const StopConfig stop_;
  const MonitorOutputs out_;
  const api::Model& model_;
  const io::Dataset& train_;
  const io::Dataset* test_;
  JsonlWriter metrics_;
  BoundedQueue<std::unique_ptr<Snapshot>> queue_;
  mutable std::mutex mu_;
  std::vector<EvalRecord> records_;
  std::string stop_reason_;
  int below_tol_ = 0;
  int64_t drift_warnings_ = 0;                               // guarded by mu_
  double drift_ = std::numeric_limits<double>::quiet_NaN();  // guarded by mu_
  int64_t drift_clock_ = -1;
  int64_t last_checkpoint_ = -1;  // monitor thread: the clock of the last checkpoint this run wrote
  ThreadGroup thread_;            // last: its destructor stops the thread before the members it uses go
};

}  // namespace sfb::runtime
