#pragma once
// The state one Worker shares between its threads, and the methods each thread runs. Internal to
// src/sfb/runtime: worker.cc (construction, run, the SF-compute thread), worker_update.cc (the
// update thread) and worker_comm.cc (the communication thread). Which thread owns what is said at
// each member; docs/architecture.md has the overview.
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
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
#include "sfb/runtime/reconciler.h"
#include "sfb/runtime/replica_drift.h"
#include "sfb/runtime/shared_weights.h"
#include "sfb/runtime/stop_protocol.h"
#include "sfb/runtime/topology.h"
#include "sfb/runtime/update_applier.h"
#include "sfb/runtime/worker.h"

namespace sfb::runtime {

inline int64_t to_ns(double s) { return static_cast<int64_t>(s * 1e9); }
inline double to_s(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

// What the update thread pops: a batch of factors, a baseline's dense update, or neither (a wake-up).
struct UpdateItem {
  SfBatchPtr sf;
  DenseUpdatePtr dense;
};

struct Worker::State {
  State(const Config& c, comm::Transport& tr, const io::Dataset& tn, const io::Dataset* te, api::Model& m,
        WorkerHooks h, Exchange* ex);

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
  bool scaling_prox = false;  // the model's prox_scale is not constantly 1

  // The replica of W (shared_weights.h): read by the compute thread under read(), written by the
  // update thread under write(). The true parameters are scale * stored: a model whose prox is a
  // pure shrinkage (L2) has it applied in O(1) to the scale (Model::prox_scale); for every other
  // model the scale stays 1.
  std::shared_ptr<SharedWeights> weights_owner;  // handed to WorkerResult at the end
  SharedWeights& weights;
  std::unique_ptr<UpdateApplier> applier;  // update thread only
  std::vector<const SfBatch*> apply_raw;   // update thread only: reused by apply()
  std::vector<float> apply_alpha;          // update thread: per batch multiplier 1 / scale

  // Own batches for peers (compute -> comm) and batches to apply (compute, comm -> update).
  // An empty item in in_q only wakes the update thread.
  BoundedQueue<SfBatchPtr> out_q;
  BoundedQueue<UpdateItem> in_q;

  // The clocks (clock_gate.h): what each rank has received and applied, the stop point, the
  // staleness rule. Every thread goes through its methods; it has its own lock.
  std::unique_ptr<ClockGate> gate;
  int64_t start_clock = 0;  // first clock (a resumed run starts at its checkpoint's clock); fixed

  // Threads: the first error wins and aborts the queues, the monitor and the exchange.
  ThreadGroup threads;

  // Statistics; each vector is written by one thread only.
  std::atomic<int64_t> compute_ns{0}, update_ns{0}, wait_ns{0};
  std::vector<int64_t> pairs_sent_to;       // comm thread
  int64_t pairs_received = 0;               // comm thread
  int64_t v_nonzeros_sent = 0;              // comm thread: sparse v, summed over destinations
  std::vector<int64_t> pairs_applied_from;  // update thread

  // Replica drift (replica_drift.h): every eval.every clocks the update thread sketches W into
  // drift_out (guarded by drift_mu); the communication thread sends it to rank 0, whose collector
  // hands complete clocks to the monitor.
  std::unique_ptr<DriftSketcher> sketcher;  // update thread
  std::mutex drift_mu;
  std::vector<std::pair<int64_t, std::vector<double>>> drift_out;  // guarded by drift_mu
  std::unique_ptr<DriftCollector> drift;                           // rank 0, comm thread

  // Partial broadcast's reconciliation (reconciler.h), null when off: the update thread runs it with
  // W held exclusively; the communication thread feeds its channel. The compute thread starts no
  // clock past the next reconciliation point before it is done (the gate knows the period).
  std::unique_ptr<comm::QueueChannel> reconcile_ch;
  std::unique_ptr<Reconciler> reconciler;  // update thread
  int64_t reconcile_every = 0;             // fixed
  int64_t next_drift = 0;                  // update thread: the next clock a drift sketch is due

  std::unique_ptr<ObjectiveMonitor> monitor;  // rank 0
  std::unique_ptr<StopProtocol> stop;         // comm thread; read after the threads have ended
  Stopwatch since_start;

  bool aborted() const { return threads.aborted(); }
  float step(int64_t clock) const { return clock_step(cfg, clock); }
  // The transport's counters when training started: what set-up moved before (a checkpoint's W
  // broadcast to every replica, comm.scheme = "auto"'s profiling) is not training traffic.
  comm::PeerCounters traffic_at_start;
  std::vector<comm::PeerCounters> peer_traffic_at_start;
  template <typename Record>
  void fill_traffic_and_times(Record& r) const {
    const auto c = t.total_counters();
    r.bytes_sent = c.bytes_sent - traffic_at_start.bytes_sent;
    r.bytes_received = c.bytes_received - traffic_at_start.bytes_received;
    r.compute_s = to_s(compute_ns);
    r.update_s = to_s(update_ns);
    r.wait_s = to_s(wait_ns);
  }
  RankStats collect_stats();

  // SF-compute thread (worker.cc).
  void compute_loop();
  // Update thread (worker_update.cc).
  void update_loop();
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
  // Communication thread (worker_comm.cc).
  void comm_loop();
  void start_exchange();
  bool send_own_batches();
  bool receive_messages();
  bool send_drift_sketches();
  void on_drift_sketch(int64_t clock, int sender, std::vector<double> sketch);
  void receive_sf(comm::Message&& m);
  void check_stop_reasons();
  bool report_if_done();
  void check_peer_timeout(bool progress, Stopwatch& last_progress) const;
};

}  // namespace sfb::runtime
