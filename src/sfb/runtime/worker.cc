// The worker: construction and run(); its three threads are classes of their own
// (compute_thread.h, update_thread.h, comm_thread.h) around the shared owners of worker_state.h.
#include "sfb/runtime/worker.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sfb/api/batch_sf_writer.h"
#include "sfb/api/minibatch.h"
#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/io/sampler.h"
#include "sfb/runtime/comm_thread.h"
#include "sfb/runtime/compute_thread.h"
#include "sfb/runtime/update_thread.h"
#include "sfb/runtime/worker_state.h"

namespace sfb::runtime {

namespace {

MonitorOutputs monitor_outputs(const Config& cfg, int workers, int64_t start_clock) {
  MonitorOutputs out;
  out.continue_from = start_clock > 0 ? start_clock : -1;
  out.metrics = cfg.output.path(cfg.output.metrics);
  out.checkpoint = cfg.output.path(cfg.checkpoint.path);
  out.model_fingerprint = cfg.model_fingerprint();
  out.seed = cfg.job.seed;
  out.lr = cfg.optimizer.lr_auto_written ? cfg.optimizer.lr : 0;  // the rate "auto" resolved to
  out.ranks = workers;
  return out;
}

// The staleness rule of this worker's clocks (clock_gate.h).
ClockGate::Rule clock_rule(const Config& cfg, int rank, int P, const std::vector<int>& sources, int64_t reconcile_every,
                           const Exchange* exchange, int ranks) {
  ClockGate::Rule rule;
  rule.rank = rank;
  rule.workers = P;
  rule.sources = sources;
  rule.bound = cfg.sfb.asp() ? cfg.runtime.asp_window : cfg.sfb.staleness;
  rule.own_batches = exchange == nullptr;
  rule.reads_own_writes = exchange && exchange->reads_own_writes();
  rule.reconcile_every = reconcile_every;
  if (exchange) {
    // A baseline's clocks arrive through its exchange: under FMS the servers are the ones that answer.
    rule.exchange = exchange->name();
    rule.via = ranks > P ? fmt::format(" (their clocks come through the {} exchange: server ranks {}..{})",
                                       exchange->name(), P, ranks - 1)
                         : fmt::format(" (their clocks come through the {} exchange)", exchange->name());
  }
  return rule;
}

}  // namespace

WorkerState::WorkerState(const Config& c, comm::Transport& tr, const io::Dataset& tn, const io::Dataset* te,
                         api::Model& m, WorkerHooks h, Exchange* ex)
    : cfg(c),
      t(tr),
      train(tn),
      test(te),
      model(m),
      hooks(std::move(h)),
      exchange(ex),
      rank(tr.rank()),
      P(worker_count(c, tr.size())),
      topo(make_topology(c, P)),
      weights_owner(std::make_shared<SharedWeights>(m.rows(), m.cols(), m.layout())),
      weights(*weights_owner) {}

WorkerState::~WorkerState() = default;

RankStats WorkerState::collect_stats() {
  RankStats s;
  s.rank = rank;
  s.clocks = gate->stop_at();
  for (auto v : comm->pairs_sent_to()) s.pairs_sent += v;
  s.v_nonzeros_sent = comm->v_nonzeros_sent();
  s.pairs_received = comm->pairs_received();
  for (auto v : update->pairs_applied_from()) s.pairs_applied += v;
  s.checksum = matrix_checksum(weights.file_order_unlocked());  // streamed; the same in either layout
  for (int q = P; q < t.size(); ++q)
    s.bytes_from_servers += t.counters(q).bytes_received - peer_traffic_at_start[static_cast<size_t>(q)].bytes_received;
  fill_traffic_and_times(s);
  s.max_lead = gate->max_lead();
  return s;
}

namespace {

// W where training starts: streamed from a file, a given matrix, or the model's init().
void initial_weights(WorkerState& s, const WorkerStart& start) {
  auto w = s.weights.write();  // no other thread yet
  if (start.load) {
    start.load(w.assign_rows());  // streamed in file order: no second W
  } else if (start.W) {
    SFB_CHECK(start.W->rows() == s.J && start.W->cols() == s.D,
              "the checkpoint's W is {} x {} but model \"{}\" on this data needs {} x {}", start.W->rows(),
              start.W->cols(), s.model.name(), s.J, s.D);
    w.assign_row_major(*start.W);
  } else {
    Rng init_rng = make_rng(s.cfg.job.seed, 0x1417);
    s.model.init(w.view(), init_rng);  // in the model's layout
  }
}

// Partial broadcast's reconciliation period and channel (the update thread's Reconciler uses them).
void set_up_reconciliation(WorkerState& s) {
  const std::optional<Reconcile> mode = reconcile_mode(s.cfg);
  if (!mode) return;
  const int q = s.topo.receivers_per_clock();
  // Every worker must agree on the period: sfbd resolves sfb.reconcile_every = 0 from every
  // partition's non-zeros before it starts the worker; here 0 falls back to dense v.
  s.reconcile_every =
      s.cfg.sfb.reconcile_every > 0 ? s.cfg.sfb.reconcile_every : auto_reconcile_every(s.P, q, s.K, s.J, s.D, s.D);
  s.reconcile_ch = std::make_unique<comm::QueueChannel>(s.t, comm::kTagReconcile);
  if (s.rank == 0)
    spdlog::info("partial broadcast: the replicas are reconciled ({}) every {} clocks (sfb.reconcile_every)", *mode,
                 s.reconcile_every);
}

}  // namespace

Worker::Worker(const Config& cfg, comm::Transport& transport, const io::Dataset& train, const io::Dataset* test,
               api::Model& model, WorkerHooks hooks, WorkerStart start, Exchange* exchange)
    : s_(std::make_unique<WorkerState>(cfg, transport, train, test, model, std::move(hooks), exchange)) {
  auto& s = *s_;
  transport.set_peer_timeout(cfg.runtime.peer_timeout_s);  // the flush at the end waits at most this long
  SFB_CHECK((cfg.comm.scheme == sfb::Scheme::kSfb) == (exchange == nullptr), "comm.scheme = \"{}\" needs {}",
            cfg.comm.scheme, exchange ? "no exchange" : "its baseline exchange (sfb::baselines::make_exchange)");
  SFB_CHECK(s.rank < s.P, "rank {} is a parameter server, not a worker", s.rank);
  s.J = static_cast<int32_t>(model.rows());
  s.D = static_cast<int32_t>(model.cols());
  s.scaling_prox = has_scaling_prox(cfg, model);
  s.K = static_cast<int32_t>(cfg.optimizer.minibatch);
  initial_weights(s, start);
  SFB_CHECK(start.clock >= 0 && start.clock < cfg.stop.max_clocks,
            "training would start at clock {}, but stop.max_clocks is {}: raise stop.max_clocks to continue",
            start.clock, cfg.stop.max_clocks);
  s.start_clock = start.clock;
  SFB_CHECK(start.train_rows >= 0 && start.train_rows <= train.n, "train_rows = {} of a partition of {} rows",
            start.train_rows, train.n);
  s.train_rows = start.train_rows > 0 ? start.train_rows : train.n;
  s.evaluate_ends = start.evaluate_ends;
  s.traffic_at_start = transport.total_counters();
  for (int q = 0; q < transport.size(); ++q) s.peer_traffic_at_start.push_back(transport.counters(q));
  s.sources = s.topo.in[static_cast<size_t>(s.rank)];
  s.sources.push_back(s.rank);
  std::sort(s.sources.begin(), s.sources.end());
  s.out_q.set_capacity(cfg.runtime.queue_capacity);
  // The in-queue holds this rank's batches plus every peer's: the compute thread and the
  // communication thread must never block each other on it for long.
  s.in_q.set_capacity(cfg.runtime.queue_capacity * s.P);
  if (s.rank == 0)
    s.monitor = std::make_unique<ObjectiveMonitor>(
        cfg.eval, cfg.stop, monitor_outputs(cfg, s.P, s.start_clock), model,
        start.objective_rows && start.objective_rows->n > 0 ? *start.objective_rows : train, test, s.weights,
        cfg.eval.copies(4.0 * static_cast<double>(s.J) * static_cast<double>(s.D)));
  set_up_reconciliation(s);
  s.gate = std::make_unique<ClockGate>(
      clock_rule(cfg, s.rank, s.P, s.sources, s.reconcile_every, exchange, transport.size()), s.start_clock,
      cfg.stop.max_clocks);
  s.compute = std::make_unique<ComputeThread>(s);
  s.update = std::make_unique<UpdateThread>(s);
  s.comm = std::make_unique<CommThread>(s);
  s.threads.on_abort([&s] {
    // abort() wakes the threads blocked on a queue now; the empty item wakes an update thread
    // that pops later (it checks aborted() after every pop).
    s.out_q.abort();
    s.in_q.abort();
    s.in_q.try_push({});
    if (s.monitor) s.monitor->abort();
    if (s.exchange) s.exchange->abort();
    if (s.reconcile_ch) s.reconcile_ch->close();
    s.gate->abort();
  });
}

Worker::~Worker() = default;

WorkerResult Worker::run() {
  auto& s = *s_;
  s.since_start.reset();
  if (s.monitor) s.monitor->start();
  s.threads.spawn([&s] { s.compute->run(); });
  s.threads.spawn([&s] { s.update->run(); });
  s.threads.spawn([&s] { s.comm->run(); });
  std::exception_ptr error;
  try {
    s.threads.join();
  } catch (...) {
    error = std::current_exception();
  }
  if (s.monitor) {
    try {
      s.monitor->finish();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return result();
}

// After the threads have ended: every thread's statistics, the final W, rank 0's records.
WorkerResult Worker::result() const {
  auto& s = *s_;
  WorkerResult r;
  r.seconds = s.since_start.seconds();
  r.self = s.collect_stats();
  r.weights = s.weights_owner;
  r.pairs_sent_to = s.comm->pairs_sent_to();
  r.comm_cpu_s = s.comm->cpu_s();
  r.pairs_applied_from = s.update->pairs_applied_from();
  r.start_clock = s.start_clock;
  r.final_clock = s.gate->stop_at();
  if (const Reconciler* rec = s.update->reconciler()) {
    const auto& st = rec->stats();
    r.reconcile_mode = Reconciler::mode_name(rec->mode());
    r.reconcile_every = s.reconcile_every;
    r.reconciles = st.count;
    r.reconcile_s = st.seconds;
    r.reconcile_max_drift = st.max_drift;
    r.reconcile_last_drift = st.last_drift;
  }
  if (s.rank == 0) {
    r.all = s.comm->stop().all_stats();
    r.evals = s.monitor->records();
    r.stop_reason = s.comm->stop().stop_reason();
    r.stop_detail = s.comm->stop().stop_detail();
    // The monitor may judge the last evaluations after the stop protocol ended the job (at
    // max_clocks, say): weights that diverged still make a diverged run.
    if (const auto m = s.monitor->stop_reason(); m && is_failure(*m)) r.stop_reason = *m;
    r.drift_warnings = s.monitor->drift_warnings();
    r.convergence_warning = s.monitor->convergence_warning();
  }
  return r;
}

}  // namespace sfb::runtime
