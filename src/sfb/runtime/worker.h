#pragma once
// One SFB worker (one rank): the SF-computing, parameter-update and communication threads
// around two bounded SF queues, plus rank 0's objective monitor (docs/design.md, "One worker
// process").
//
//  * SF-compute thread: waits until its clock c is allowed (every in-neighbour's batches up to
//    clock c - s - 1, and its own, are applied), samples K rows, computes the SF batch from W
//    under a shared lock, and pushes it to the out-queue (for peers) and the in-queue (for itself).
//  * Update thread: pops batches from the in-queue and applies W += U^T V under the exclusive
//    lock. Under BSP it applies clock c only when all of clock c is present, in sender-rank order,
//    so every replica performs the same float operations in the same order (bitwise identical).
//    Under SSP/ASP it applies batches as they arrive.
//  * Communication thread: serialises each own batch once and sends it to the out-neighbours,
//    decodes received batches into the in-queue, runs the stop protocol and the final handshake.
//
// No data race on W (shared_weights.h): the compute thread and the monitor read W only through a
// shared-lock Reader, the update thread writes only through the exclusive Writer.
//
// Stop protocol (stop_protocol.h): rank 0 decides to stop (monitor, time limit, signal, or a peer's
// request) and sends STOP_QUERY; each rank pauses before its next clock and replies with its
// committed clock count; rank 0 sends STOP_AT = max of the replies; all ranks compute up to that
// clock, apply everything, send DONE (with statistics) to rank 0, which answers FINAL when all are
// done. Without a stop decision every rank stops at stop.max_clocks.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sfb/api/model.h"
#include "sfb/comm/transport.h"
#include "sfb/core/config.h"
#include "sfb/core/metrics.h"
#include "sfb/core/stop_reason.h"
#include "sfb/io/dataset.h"
#include "sfb/runtime/exchange.h"
#include "sfb/runtime/job_rules.h"
#include "sfb/runtime/rank_stats.h"
#include "sfb/runtime/shared_weights.h"
#include "sfb/runtime/topology.h"

namespace sfb::runtime {

struct WorkerState;

// Hooks for tests and studies (study_hooks.h); each is called on the thread named.
struct WorkerHooks {
  // Update thread, W locked: clock `clock` has been applied from every source (BSP only).
  std::function<void(int64_t clock, const Matrix& W)> on_clock_applied;
  // Compute thread: about to compute clock `clock` (after the staleness wait).
  std::function<void(int64_t clock)> on_clock_start;
  // Compute thread: clock `clock`'s batch has been queued for the update and communication threads.
  std::function<void(int64_t clock)> on_clock_committed;
};

// Where training starts: a fresh W from model.init() at clock 0, or a checkpoint's W and clock
// (the same on every rank, so under any consistency the replicas start equal).
struct WorkerStart {
  int64_t clock = 0;
  const Matrix* W = nullptr;  // null: model.init() (or `load`)
  // Instead of W: writes every row of W in file order into the sink it is given (a checkpoint or
  // model file streamed in row blocks, so the start never holds W twice). Collective when it
  // broadcasts: every rank's Worker calls it in its constructor.
  std::function<void(const RowSink&)> load;
  // Rank 0: the rows the objective is evaluated on (io::LoadedData::eval_sample, a uniform sample
  // of every partition); null or empty: rank 0's own partition (tests on one process).
  const io::Dataset* objective_rows = nullptr;
  // > 0: this rank trains on its partition's first train_rows rows only (the learning-rate
  // search's trials hold the rest out to judge the rate on rows nobody trained on); 0: all.
  int64_t train_rows = 0;
  // Rank 0 evaluates W at the start and at the end, besides every eval.every clocks. false: the
  // evaluations between only (the profiler's engine runs, which write nothing and would spend
  // their time budget on two evaluations, each with its copy of W where eval.snapshot copies: 2.6
  // s of every run on the sparse 5,000 x 20,000 walk-through job).
  bool evaluate_ends = true;
};

struct WorkerResult {
  // The final replica (threads ended: read it unlocked); the model file and checksum stream it.
  std::shared_ptr<const SharedWeights> weights;
  // A copy of the final W in file order (tests and small models).
  Matrix W() const { return weights->row_major_copy(); }
  RankStats self;
  std::vector<int64_t> pairs_sent_to;               // per destination rank
  std::vector<int64_t> pairs_applied_from;          // per source rank (own included)
  std::vector<RankStats> all;                       // rank 0: every rank's statistics, in rank order
  std::vector<EvalRecord> evals;                    // rank 0
  StopReason stop_reason = StopReason::kMaxClocks;  // rank 0
  std::string stop_detail;                          // rank 0: "rank 2 received signal 15", or empty
  int64_t start_clock = 0;                          // where training started (a checkpoint's clock when resumed)
  // Partial broadcast's reconciliations (runtime/reconciler.h); mode empty when off.
  int64_t drift_warnings = 0;       // rank 0: evaluations whose replica drift exceeded eval.drift_warn
  std::string convergence_warning;  // rank 0: ObjectiveMonitor::convergence_warning()
  std::string reconcile_mode;
  int64_t reconcile_every = 0;
  int64_t reconciles = 0;
  double reconcile_s = 0, reconcile_max_drift = 0, reconcile_last_drift = 0;
  int64_t final_clock = 0;
  double seconds = 0;
  // This rank's communication thread's CPU seconds over the run (CommThread::cpu_s; -1 when it
  // polled): with the transport's own threads' (comm::Transport::own_threads_cpu_seconds), what
  // its broadcast costs the rank's cores (the profile's bcast_cpu_ns_per_byte).
  double comm_cpu_s = 0;
};

class Worker {
 public:
  // `exchange`: null for comm.scheme = "sfb"; the baseline's Exchange otherwise (sfb/baselines).
  Worker(const Config& cfg, comm::Transport& transport, const io::Dataset& train, const io::Dataset* test,
         api::Model& model, WorkerHooks hooks = {}, WorkerStart start = {}, Exchange* exchange = nullptr);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Trains until the job stops; rethrows the first error of any thread.
  WorkerResult run();

 private:
  WorkerResult result() const;
  std::unique_ptr<WorkerState> s_;
};

}  // namespace sfb::runtime
