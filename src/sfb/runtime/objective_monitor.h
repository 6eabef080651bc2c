#pragma once
// Rank 0's objective monitor: a thread that evaluates W at the clocks the update thread hands it
// (once every replica has applied clock c), writes one metrics line and one progress line per
// evaluation, writes checkpoints, and decides whether the job should stop (target accuracy or
// objective, relative change below tolerance for `patience` evaluations, or a diverged objective).
//
// It holds at most one copy of W, or none (eval.snapshot, docs/design.md "Memory"):
//  * copy: submit() copies W into the monitor's one snapshot (its memory reused) once the monitor is
//    done with the previous one, and the monitor evaluates it while training goes on;
//  * in place: submit() returns once the monitor holds the replica's shared lock, so W stays at that
//    clock until the evaluation and the checkpoint are done (rank 0's next update waits for them;
//    its compute thread still reads W). No copy: memory is one W per rank.
// Checkpoints are written from W in row blocks (core/row_blocks.h), never from a file-order copy.
//
// submit() is called by the update thread (W's only writer); stop_reason() by the communication
// thread.
#include <atomic>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sfb/api/model.h"
#include "sfb/core/config.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/metrics.h"
#include "sfb/core/stop_reason.h"
#include "sfb/core/thread_group.h"
#include "sfb/runtime/shared_weights.h"
#include "sfb/runtime/stop_rule.h"

namespace sfb::runtime {

// What the update thread asks of the monitor at a clock boundary.
struct EvalRequest {
  EvalRecord record;  // everything but objective and accuracy filled in
  bool final = false;
  bool evaluate = true;     // compute the objective and accuracy, write a metrics line
  bool checkpoint = false;  // write W as the checkpoint (checkpoint.path)
};

// Where the monitor writes, and what goes into a checkpoint besides W.
struct MonitorOutputs {
  std::string metrics;     // metrics.jsonl path; "" for none
  std::string checkpoint;  // checkpoint path; "" for none
  uint64_t model_fingerprint = 0;
  uint64_t seed = 0;
  double lr = 0;  // optimizer.lr when the config said "auto" (the checkpoint carries it), else 0
  int ranks = 1;  // workers of the job that writes the checkpoints
  // A resumed run (--resume at this clock): metrics.jsonl continues the interrupted run's file
  // from there instead of starting over; -1 for a new run.
  int64_t continue_from = -1;
};

// A model metric named "duality_gap" (SDCA) over the evaluations so far: "" while it shrinks, or a
// warning when the last 6 evaluations did not bring it 1% lower and it is still above 1e-3 (a gap
// that grows means a damping too small for the data, one that creeps a damping too large).
std::string duality_gap_stall(const std::vector<EvalRecord>& records);

class ObjectiveMonitor {
 public:
  // `weights`: the replica it evaluates; `snapshot`: through one copy (true) or in place.
  ObjectiveMonitor(const EvalConfig& eval, const StopConfig& stop, MonitorOutputs out, const api::Model& model,
                   const io::Dataset& train, const io::Dataset* test, const SharedWeights& weights, bool snapshot);
  ~ObjectiveMonitor();
  void start();
  // Update thread, W unchanged during the call: waits until the monitor is done with its previous
  // request (back-pressure), then copies W into the snapshot (copy) or waits until the monitor
  // holds W's shared lock (in place). Returns at once when the monitor was aborted.
  void submit(const EvalRequest& r);
  // Waits for the final request's evaluation; rethrows an evaluation error.
  void finish();
  // Stops the monitor; a request not yet taken is dropped.
  void abort();
  // nullopt while training should go on.
  std::optional<StopReason> stop_reason() const;
  std::vector<EvalRecord> records() const;
  // Evaluations whose replica drift exceeded eval.drift_warn.
  int64_t drift_warnings() const;
  // Empty, or why the model's duality gap says training stopped converging (duality_gap_stall).
  std::string convergence_warning() const;
  // The replica drift measured at `clock` (communication thread); every later record carries the
  // latest one.
  void set_drift(int64_t clock, double drift);

 private:
  // W as the monitor sees it while handling one request.
  struct View {
    api::Weights weights;
    RowSource file_order;
    bool finite = true;
  };
  void loop();
  void handle(const EvalRequest& q, const View& w);
  // Whether `q` reads W: it evaluates, or it checkpoints where a checkpoint path is set.
  bool needs_weights(const EvalRequest& q) const { return q.evaluate || (q.checkpoint && !out_.checkpoint.empty()); }
  EvalRecord evaluate(const EvalRecord& base, const View& w);
  void write_checkpoint(int64_t clock, const View& w);
  void commit_checkpoint();
  void checkpoint_failed(int64_t clock, const Error& e) const;
  void checkpoint_if_good(int64_t clock, const View& w, const EvalRecord& r);
  // stop_reason_ from the records so far (rule_), unless it is set already.
  void decide();
  void log_progress(const EvalRecord& r) const;
  bool drift_too_far(const EvalRecord& r) const;

  const EvalConfig eval_;
  const StopConfig stop_;
  const MonitorOutputs out_;
  const api::Model& model_;
  const io::Dataset& train_;
  const io::Dataset* test_;
  JsonlWriter metrics_;
  const SharedWeights& weights_;
  const bool snapshot_;
  Matrix snap_;  // copy mode: W at the request's clock (stored layout, scale folded in)
  // The hand-over: the update thread sets pending_, the monitor takes it (busy_ until it is done);
  // in place, `acquired_` counts the requests whose shared lock the monitor holds or held.
  std::mutex hand_mu_;
  std::condition_variable hand_cv_;
  std::optional<EvalRequest> pending_;
  bool busy_ = false, aborted_ = false;
  int64_t submitted_ = 0, acquired_ = 0;
  mutable std::mutex mu_;
  std::vector<EvalRecord> records_;
  std::optional<StopReason> stop_reason_;
  StopRule rule_;
  int64_t drift_warnings_ = 0;                               // guarded by mu_
  std::string convergence_warning_;                          // guarded by mu_
  double drift_ = std::numeric_limits<double>::quiet_NaN();  // guarded by mu_
  int64_t drift_clock_ = -1;
  int64_t last_checkpoint_ = -1;                   // monitor thread: the clock of the last checkpoint this run wrote
  std::unique_ptr<AtomicFileWriter> ckpt_writer_;  // monitor thread: a checkpoint written, not yet committed
  int64_t pending_clock_ = -1;
  ThreadGroup thread_;  // last: its destructor stops the thread before the members it uses go
};

}  // namespace sfb::runtime
