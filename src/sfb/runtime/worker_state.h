#pragma once
// What one Worker's threads share, internal to src/sfb/runtime. Each thread is a class that owns
// its own members (compute_thread.h, update_thread.h, comm_thread.h); this struct holds only what
// is fixed for the run and the owners that more than one thread goes through, each of which says
// who may do what (docs/architecture.md, "Threads of one worker"):
//   * the replica of W (SharedWeights: read by the compute thread and the monitor, written by the
//     update thread), the clocks (ClockGate: its own lock), the two queues, the thread group;
//   * the drift sketches (update -> comm, under drift_mu), the reconciliation's channel (comm feeds
//     it, update all-reduces through it), rank 0's monitor (update submits, comm asks whether to
//     stop), the three threads' busy times (atomics).
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "sfb/comm/channel.h"
#include "sfb/core/bounded_queue.h"
#include "sfb/core/thread_group.h"
#include "sfb/core/timer.h"
#include "sfb/runtime/clock_gate.h"
#include "sfb/runtime/model_prox.h"
#include "sfb/runtime/objective_monitor.h"
#include "sfb/runtime/shared_weights.h"
#include "sfb/runtime/topology.h"
#include "sfb/runtime/worker.h"

namespace sfb::runtime {

inline int64_t to_ns(double s) { return static_cast<int64_t>(s * 1e9); }
inline double to_s(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

// What the update thread pops: a batch of factors, a baseline's dense update, or neither (a wake-up).
struct UpdateItem {
  SfBatchPtr sf;
  DenseUpdatePtr dense;
};

class ComputeThread;
class UpdateThread;
class CommThread;

struct WorkerState {
  WorkerState(const Config& c, comm::Transport& tr, const io::Dataset& tn, const io::Dataset* te, api::Model& m,
              WorkerHooks h, Exchange* ex);
  ~WorkerState();

  // Fixed for the run.
  const Config& cfg;
  comm::Transport& t;
  const io::Dataset& train;
  const io::Dataset* test;
  api::Model& model;
  WorkerHooks hooks;
  Exchange* exchange;  // null: SFB (the communication thread broadcasts the SFs itself)
  const int rank;
  const int P;  // workers (the ranks after them, if any, are parameter servers)
  Topology topo;
  std::vector<int> sources;  // in-neighbours and this rank, ascending: the BSP apply order
  int32_t J = 0, D = 0, K = 0;
  bool scaling_prox = false;    // the model's prox_scale is not constantly 1
  int64_t start_clock = 0;      // first clock (a resumed run starts at its checkpoint's clock)
  int64_t train_rows = 0;       // the partition's leading rows the minibatches are drawn from
  bool evaluate_ends = true;    // WorkerStart::evaluate_ends
  int64_t reconcile_every = 0;  // partial broadcast's reconciliation period (0: none)
  // The transport's counters when training started: what set-up moved before (a checkpoint's W
  // broadcast to every replica, comm.scheme = "auto"'s profiling) is not training traffic.
  comm::PeerCounters traffic_at_start;
  std::vector<comm::PeerCounters> peer_traffic_at_start;

  // The replica of W (shared_weights.h): read by the compute thread under read(), written by the
  // update thread under write(). The true parameters are scale * stored: a model whose prox is a
  // pure shrinkage (L2) has it applied in O(1) to the scale (Model::prox_scale); for every other
  // model the scale stays 1.
  std::shared_ptr<SharedWeights> weights_owner;  // handed to WorkerResult at the end
  SharedWeights& weights;

  // Own batches for peers (compute -> comm) and batches to apply (compute, comm -> update).
  // An empty item in in_q only wakes the update thread.
  BoundedQueue<SfBatchPtr> out_q;
  BoundedQueue<UpdateItem> in_q;

  // The clocks (clock_gate.h): what each rank has received and applied, the stop point, the
  // staleness rule. Every thread goes through its methods; it has its own lock.
  std::unique_ptr<ClockGate> gate;

  // Threads: the first error wins and aborts the queues, the monitor and the exchange.
  ThreadGroup threads;
  std::atomic<int64_t> compute_ns{0}, update_ns{0}, wait_ns{0};  // each written by its thread

  // Replica drift (replica_drift.h): every eval.every clocks the update thread sketches W into
  // drift_out (guarded by drift_mu); the communication thread sends it to rank 0, whose collector
  // hands complete clocks to the monitor.
  std::mutex drift_mu;
  std::vector<std::pair<int64_t, std::vector<double>>> drift_out;  // guarded by drift_mu

  // Partial broadcast's reconciliation, null when off: the communication thread feeds this channel,
  // the update thread's Reconciler all-reduces through it.
  std::unique_ptr<comm::QueueChannel> reconcile_ch;

  std::unique_ptr<ObjectiveMonitor> monitor;  // rank 0
  Stopwatch since_start;

  // The threads, each owning its members; built by the Worker, run by its thread group.
  std::unique_ptr<ComputeThread> compute;
  std::unique_ptr<UpdateThread> update;
  std::unique_ptr<CommThread> comm;

  bool aborted() const { return threads.aborted(); }
  float step(int64_t clock) const { return clock_step(cfg, clock); }
  template <typename Record>
  void fill_traffic_and_times(Record& r) const {
    const auto c = t.total_counters();
    r.bytes_sent = c.bytes_sent - traffic_at_start.bytes_sent;
    r.bytes_received = c.bytes_received - traffic_at_start.bytes_received;
    r.compute_s = to_s(compute_ns);
    r.update_s = to_s(update_ns);
    r.wait_s = to_s(wait_ns);
  }
  // This rank's statistics (worker.cc): the communication thread's once everything is applied, or
  // anyone's after the threads have ended.
  RankStats collect_stats();
};

}  // namespace sfb::runtime
