// The worker: construction, run(), and the SF-compute thread. The update thread is in
// worker_update.cc, the communication thread in worker_comm.cc (worker_state.h has the state).
#include "sfb/runtime/worker.h"

#include <algorithm>
#include <thread>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sfb/api/batch_sf_writer.h"
#include "sfb/api/minibatch.h"
#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/io/sampler.h"
#include "sfb/runtime/worker_state.h"

namespace sfb::runtime {

int resolve_threads(const RuntimeConfig& cfg, int ranks_on_host) {
  if (cfg.threads > 0) return static_cast<int>(cfg.threads);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, ranks_on_host));
}

int worker_count(const Config& cfg, int ranks) {
  if (cfg.comm.scheme != "fms") return ranks;
  SFB_CHECK(ranks > cfg.fms.servers,
            "comm.scheme = \"fms\" with fms.servers = {} needs more than {} ranks, got {}: "
            "run mpirun -np P+S",
            cfg.fms.servers, cfg.fms.servers, ranks);
  return ranks - static_cast<int>(cfg.fms.servers);
}

Topology make_topology(const Config& cfg, int workers) {
  if (cfg.comm.scheme != "sfb" || cfg.sfb.broadcast == "full") return Topology::full(workers);
  const int q = static_cast<int>(cfg.sfb.halton_q);
  if (cfg.sfb.broadcast == "halton") return Topology::halton_rotating(workers, q);
  Topology t = Topology::halton(workers, q);
  const auto islands = t.islands();
  if (islands.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& island : islands) parts.push_back(fmt::format("{{{}}}", fmt::join(island, ", ")));
    const auto offsets = Topology::halton_offsets(workers, q);
    throw InvalidArgument(fmt::format(
        "sfb.broadcast = \"halton-static\" with P = {} workers and Q = {} (offsets {}) splits the workers into {} "
        "islands that never exchange factors: {}; use sfb.broadcast = \"halton\" (rotating receivers), another "
        "sfb.halton_q, or another number of workers",
        workers, offsets.size(), fmt::join(offsets, ", "), islands.size(), fmt::join(parts, " ")));
  }
  return t;
}

std::string reconcile_mode(const Config& cfg) {
  const std::string& m = cfg.sfb.reconcile;
  const bool partial = cfg.comm.scheme == "sfb" && cfg.sfb.broadcast != "full";
  const bool bsp = cfg.sfb.staleness == 0;
  if (m == "off" || (m == "auto" && (!partial || !bsp))) return {};
  SFB_CHECK(partial, "sfb.reconcile = \"{}\" reconciles partial broadcast, but {}; use sfb.reconcile = \"auto\"", m,
            cfg.comm.scheme != "sfb" ? fmt::format("comm.scheme = \"{}\"", cfg.comm.scheme)
                                     : std::string("sfb.broadcast = \"full\" (the replicas are already one)"));
  SFB_CHECK(bsp,
            "sfb.reconcile = \"{}\" needs BSP (sfb.staleness = 0): under {} the workers are at different clocks; "
            "use sfb.reconcile = \"auto\" (off there) and watch replica_drift",
            m, cfg.sfb.consistency_name());
  return m == "auto" ? "mean" : m;
}

namespace {

MonitorOutputs monitor_outputs(const Config& cfg, int workers, int64_t start_clock) {
  MonitorOutputs out;
  out.continue_from = start_clock > 0 ? start_clock : -1;
  out.metrics = cfg.output.path(cfg.output.metrics);
  out.checkpoint = cfg.output.path(cfg.checkpoint.path);
  out.model_fingerprint = cfg.model_fingerprint();
  out.seed = cfg.job.seed;
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

Worker::State::State(const Config& c, comm::Transport& tr, const io::Dataset& tn, const io::Dataset* te, api::Model& m,
                     WorkerHooks h, Exchange* ex)
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

RankStats Worker::State::collect_stats() {
  RankStats s;
  s.rank = rank;
  s.clocks = gate->stop_at();
  for (auto v : pairs_sent_to) s.pairs_sent += v;
  s.v_nonzeros_sent = v_nonzeros_sent;
  s.pairs_received = pairs_received;
  for (auto v : pairs_applied_from) s.pairs_applied += v;
  s.checksum = matrix_checksum(weights.file_order_unlocked());  // streamed; the same in either layout
  for (int q = P; q < t.size(); ++q)
    s.bytes_from_servers +=
        t.counters(q).bytes_received - peer_traffic_at_start[static_cast<size_t>(q)].bytes_received;
  fill_traffic_and_times(s);
  s.max_lead = gate->max_lead();
  return s;
}

void Worker::State::compute_loop() {
  io::EpochSampler sampler(train.n, cfg.job.seed, static_cast<uint64_t>(rank));
  // The minibatches are a function of (seed, rank, clock): a resumed run draws what an
  // uninterrupted one would have drawn from here on.
  sampler.skip(start_clock * K);
  api::MiniBatch batch;
  std::vector<int64_t> rows;
  // commit() runs inside compute_sf, under the shared lock on W: the batch is queued only after
  // the lock is released, or a full in-queue would block us while the update thread waits for W.
  SfBatchPtr committed;
  api::BatchSfWriter writer(J, D, [&committed](SfBatchPtr b) { committed = std::move(b); });
  const bool gradient = model.update_rule() == api::UpdateRule::kGradientStep;
  const bool sparse_v = model.sparse_v();
  double waited_s = 0;
  const auto allowed = [&](int64_t c) {
    const bool go = gate->wait_for_clock(c, cfg.runtime.peer_timeout_s, &waited_s);
    wait_ns = to_ns(waited_s);
    return go;
  };
  for (int64_t c = start_clock; allowed(c); ++c) {
    if (hooks.on_clock_start) hooks.on_clock_start(c);
    Stopwatch sw;
    sampler.next(K, rows);
    api::gather(train, rows, batch);
    batch.clock = c;
    writer.begin(rank, c, K, gradient ? -step(c) / static_cast<float>(K) : 1.0f, sparse_v);
    try {
      const auto w = weights.read();
      model.compute_sf(w.weights(), batch, writer);
    } catch (const InvalidArgument& e) {
      // A contract error of the writer (write_u / write_v / commit) names the plugin and the call.
      throw InvalidArgument(fmt::format("model \"{}\"{}: compute_sf() at clock {}: {}", model.name(),
                                        cfg.model.plugin.empty() ? "" : " (plugin " + cfg.model.plugin + ")", c,
                                        e.what()));
    }
    SFB_CHECK(writer.committed() && committed, "model \"{}\" returned from compute_sf without commit() at clock {}",
              model.name(), c);
    gate->own_committed();
    // SFB applies its own batch like everyone's; a baseline gets it back inside the exchanged update.
    if (!exchange) in_q.push({committed, nullptr});
    out_q.push(std::move(committed));
    compute_ns += to_ns(sw.seconds());
    if (hooks.on_clock_committed) hooks.on_clock_committed(c);
  }
  in_q.push({});
}

Worker::Worker(const Config& cfg, comm::Transport& transport, const io::Dataset& train, const io::Dataset* test,
               api::Model& model, WorkerHooks hooks, WorkerStart start, Exchange* exchange)
    : s_(std::make_unique<State>(cfg, transport, train, test, model, std::move(hooks), exchange)) {
  auto& s = *s_;
  transport.set_peer_timeout(cfg.runtime.peer_timeout_s);  // the flush at the end waits at most this long
  SFB_CHECK((cfg.comm.scheme == "sfb") == (exchange == nullptr), "comm.scheme = \"{}\" needs {}", cfg.comm.scheme,
            exchange ? "no exchange" : "its baseline exchange (sfb::baselines::make_exchange)");
  SFB_CHECK(s.rank < s.P, "rank {} is a parameter server, not a worker", s.rank);
  s.applier =
      std::make_unique<UpdateApplier>(std::max<int>(1, static_cast<int>(cfg.runtime.threads)), s.weights.layout());
  s.J = static_cast<int32_t>(model.rows());
  s.D = static_cast<int32_t>(model.cols());
  s.scaling_prox = has_scaling_prox(cfg, model);
  s.K = static_cast<int32_t>(cfg.optimizer.minibatch);
  {
    auto w = s.weights.write();  // no other thread yet
    if (start.load) {
      start.load(w.assign_rows());  // streamed in file order: no second W
    } else if (start.W) {
      SFB_CHECK(start.W->rows() == s.J && start.W->cols() == s.D,
                "the checkpoint's W is {} x {} but model \"{}\" on this data needs {} x {}", start.W->rows(),
                start.W->cols(), model.name(), s.J, s.D);
      w.assign_row_major(*start.W);
    } else {
      Rng init_rng = make_rng(cfg.job.seed, 0x1417);
      model.init(w.view(), init_rng);  // in the model's layout
    }
  }
  SFB_CHECK(start.clock >= 0 && start.clock < cfg.stop.max_clocks,
            "training would start at clock {}, but stop.max_clocks is {}: raise stop.max_clocks to continue",
            start.clock, cfg.stop.max_clocks);
  s.start_clock = start.clock;
  s.traffic_at_start = transport.total_counters();
  for (int q = 0; q < transport.size(); ++q) s.peer_traffic_at_start.push_back(transport.counters(q));
  s.sources = s.topo.in[static_cast<size_t>(s.rank)];
  s.sources.push_back(s.rank);
  std::sort(s.sources.begin(), s.sources.end());
  s.pairs_sent_to.assign(static_cast<size_t>(s.P), 0);
  s.pairs_applied_from.assign(static_cast<size_t>(s.P), 0);
  s.out_q.set_capacity(cfg.runtime.queue_capacity);
  // The in-queue holds this rank's batches plus every peer's: the compute thread and the
  // communication thread must never block each other on it for long.
  s.in_q.set_capacity(cfg.runtime.queue_capacity * s.P);
  if (s.rank == 0)
    s.monitor = std::make_unique<ObjectiveMonitor>(
        cfg.eval, cfg.stop, monitor_outputs(cfg, s.P, s.start_clock), model,
        start.objective_rows && start.objective_rows->n > 0 ? *start.objective_rows : train, test, s.weights,
        cfg.eval.copies(4.0 * static_cast<double>(s.J) * static_cast<double>(s.D)));
  s.sketcher = std::make_unique<DriftSketcher>(s.weights.stored_unlocked().rows(), s.weights.stored_unlocked().cols(),
                                               cfg.job.seed);
  if (const auto mode = reconcile_mode(cfg); !mode.empty()) {
    const int q = s.topo.receivers_per_clock();
    // Every worker must agree on the period: sfbd resolves sfb.reconcile_every = 0 from every
    // partition's non-zeros before it starts the worker; here 0 falls back to dense v.
    s.reconcile_every =
        cfg.sfb.reconcile_every > 0 ? cfg.sfb.reconcile_every : auto_reconcile_every(s.P, q, s.K, s.J, s.D, s.D);
    s.reconcile_ch = std::make_unique<comm::QueueChannel>(transport, comm::kTagReconcile);
    s.reconciler = std::make_unique<Reconciler>(*s.reconcile_ch, s.P, q + 1,
                                                mode == "sum" ? Reconciler::Mode::kSum : Reconciler::Mode::kMean,
                                                s.reconcile_every, s.start_clock, s.weights.stored_unlocked());
    if (s.rank == 0)
      spdlog::info("partial broadcast: the replicas are reconciled ({}) every {} clocks (sfb.reconcile_every)", mode,
                   s.reconcile_every);
  }
  s.gate = std::make_unique<ClockGate>(
      clock_rule(cfg, s.rank, s.P, s.sources, s.reconcile_every, exchange, transport.size()), s.start_clock,
      cfg.stop.max_clocks);
  if (s.rank == 0) s.drift = std::make_unique<DriftCollector>(s.P);
  s.threads.on_abort([&s] {
    // abort() wakes the threads blocked on a queue now; the null batch wakes an update thread
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
  s.threads.spawn([&s] { s.compute_loop(); });
  s.threads.spawn([&s] { s.update_loop(); });
  s.threads.spawn([&s] { s.comm_loop(); });
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

  WorkerResult r;
  r.seconds = s.since_start.seconds();
  r.self = s.collect_stats();
  r.weights = s.weights_owner;
  r.pairs_sent_to = s.pairs_sent_to;
  r.pairs_applied_from = s.pairs_applied_from;
  r.start_clock = s.start_clock;
  r.final_clock = s.gate->stop_at();
  if (s.reconciler) {
    const auto& st = s.reconciler->stats();
    r.reconcile_mode = Reconciler::mode_name(s.reconciler->mode());
    r.reconcile_every = s.reconcile_every;
    r.reconciles = st.count;
    r.reconcile_s = st.seconds;
    r.reconcile_max_drift = st.max_drift;
    r.reconcile_last_drift = st.last_drift;
  }
  if (s.rank == 0) {
    r.all = s.stop->all_stats();
    r.evals = s.monitor->records();
    r.stop_reason = s.stop->stop_reason();
    // The monitor may judge the last evaluations after the stop protocol ended the job (at
    // max_clocks, say): weights that diverged still make a diverged run.
    if (const auto m = s.monitor->stop_reason(); m == "diverged" || m == "replica_drift") r.stop_reason = m;
    r.drift_warnings = s.monitor->drift_warnings();
  }
  return r;
}

}  // namespace sfb::runtime
