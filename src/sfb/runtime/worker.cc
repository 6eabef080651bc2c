#include "sfb/runtime/worker.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <thread>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include "sfb/core/bounded_queue.h"

#include "sfb/api/batch_sf_writer.h"
#include "sfb/api/minibatch.h"
#include "sfb/comm/sf_codec.h"
#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/core/timer.h"
#include "sfb/io/sampler.h"
#include "sfb/runtime/objective_monitor.h"
#include "sfb/runtime/signals.h"
#include "sfb/runtime/update_applier.h"

namespace sfb::runtime {

using comm::ControlMsg;
using comm::ControlType;

int resolve_threads(const Config& cfg, int ranks_on_host) {
  if (cfg.runtime.threads > 0) return static_cast<int>(cfg.runtime.threads);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, ranks_on_host));
}

namespace {

int64_t to_ns(double s) { return static_cast<int64_t>(s * 1e9); }
double to_s(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

std::vector<int64_t> pack_stats(const RankStats& s) {
  int64_t checksum = 0;
  std::memcpy(&checksum, &s.checksum, 8);
  return {s.clocks, s.pairs_sent, s.pairs_received, s.pairs_applied, checksum, s.bytes_sent, s.bytes_received,
          to_ns(s.compute_s), to_ns(s.update_s), to_ns(s.wait_s), s.max_lead, s.bytes_from_servers};
}

RankStats unpack_stats(int rank, const std::vector<int64_t>& v) {
  if (v.size() != 12) throw CommError(fmt::format("DONE from rank {}: {} statistics words, expected 12", rank, v.size()));
  RankStats s;
  s.rank = rank;
  s.clocks = v[0];
  s.pairs_sent = v[1];
  s.pairs_received = v[2];
  s.pairs_applied = v[3];
  std::memcpy(&s.checksum, &v[4], 8);
  s.bytes_sent = v[5];
  s.bytes_received = v[6];
  s.compute_s = to_s(v[7]);
  s.update_s = to_s(v[8]);
  s.wait_s = to_s(v[9]);
  s.max_lead = v[10];
  s.bytes_from_servers = v[11];
  return s;
}

}  // namespace

int worker_count(const Config& cfg, int ranks) {
  if (cfg.comm.scheme != "fms") return ranks;
  SFB_CHECK(ranks > cfg.fms.servers, "comm.scheme = \"fms\" with fms.servers = {} needs more than {} ranks, got {}: "
            "run mpirun -np P+S", cfg.fms.servers, cfg.fms.servers, ranks);
  return ranks - static_cast<int>(cfg.fms.servers);
}

namespace {
comm::Topology make_topology(const Config& cfg, int workers) {
  if (cfg.comm.scheme == "sfb" && cfg.sfb.broadcast == "halton") return comm::Topology::halton(workers, static_cast<int>(cfg.sfb.halton_q));
  return comm::Topology::full(workers);
}
}  // namespace

struct Worker::State {
  State(const Config& c, comm::Transport& tr, const io::Dataset& tn, const io::Dataset* te, api::Model& m, WorkerHooks h,
        Exchange* ex)
      : cfg(c), t(tr), train(tn), test(te), model(m), hooks(std::move(h)), exchange(ex), rank(tr.rank()),
        P(worker_count(c, tr.size())), topo(make_topology(c, P)) {}

  const Config& cfg;
  comm::Transport& t;
  const io::Dataset& train;
  const io::Dataset* test;
  api::Model& model;
  WorkerHooks hooks;
  Exchange* exchange;  // null: SFB (the communication thread broadcasts the SFs itself)
  const int rank;
  const int P;         // workers (the ranks after them, if any, are parameter servers)
  comm::Topology topo;
  std::vector<int> sources;  // in-neighbours and this rank, ascending: the BSP apply order
  int threads = 1;
  int32_t J = 0, D = 0, K = 0;
  std::unique_ptr<UpdateApplier> applier_ptr;  // update thread only
  std::vector<const SfBatch*> apply_raw;       // update thread only: reused by apply()

  // W and its lock: shared by the compute thread (reads), exclusive for the update thread.
  // The true parameters are w_scale * W: a model whose prox is a pure shrinkage (L2) has it
  // applied in O(1) to w_scale (Model::prox_scale); for every other model w_scale stays 1.
  Matrix W;
  float w_scale = 1.0f;
  std::shared_mutex w_mu;
  std::vector<float> apply_alpha;  // update thread: per batch multiplier 1 / w_scale

  // Own batches for peers (compute -> comm) and batches to apply (compute, comm -> update).
  // A null pointer in in_q only wakes the update thread.
  BoundedQueue<SfBatchPtr> out_q;
  BoundedQueue<SfBatchPtr> in_q;

  // Clock state, guarded by mu; cv wakes the compute thread.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int64_t> applied;  // per rank: batches applied (= clocks, they arrive in order)
  std::vector<int64_t> received; // per rank: batches received (own: committed), for diagnostics
  int64_t start_clock = 0;       // first clock (a resumed run starts at its checkpoint's clock)
  int64_t stop_at = 0;           // clocks every rank computes
  int64_t started = 0;           // clocks this rank has started computing
  bool paused = false;           // a stop query is open: start no new clock
  bool compute_done = false;
  bool update_done = false;

  std::atomic<bool> aborted{false};
  std::mutex err_mu;
  std::exception_ptr error;

  // Statistics; each vector is written by one thread only.
  std::atomic<int64_t> compute_ns{0}, update_ns{0}, wait_ns{0};
  std::vector<int64_t> pairs_sent_to;       // comm thread
  int64_t pairs_received = 0;               // comm thread
  std::vector<int64_t> pairs_applied_from;  // update thread
  int64_t max_lead = 0;                     // compute thread

  // Rank 0.
  std::unique_ptr<ObjectiveMonitor> monitor;
  std::vector<RankStats> all_stats;
  std::string stop_reason = "max_clocks";
  Stopwatch since_start;

  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(err_mu);
      if (!error) error = e;
    }
    aborted = true;
    // abort() wakes the threads blocked on a queue now; the null batch wakes an update thread
    // that pops later (it checks `aborted` after every pop).
    out_q.abort();
    in_q.abort();
    in_q.try_push(nullptr);
    if (monitor) monitor->abort();
    if (exchange) exchange->abort();
    std::lock_guard lock(mu);
    cv.notify_all();
  }

  float step(int64_t clock) const {
    return static_cast<float>(cfg.optimizer.lr / (1.0 + cfg.optimizer.lr_decay * static_cast<double>(clock)));
  }

  // SSP rule (DESIGN.md): clock c may start once every in-neighbour's batches of clocks
  // < c - s are applied. A worker always reads its own writes (as in Petuum's SSP): its own
  // batches of clocks < c must be applied too, or under ASP a fast compute thread would compute
  // many clocks from the same stale W. Called with mu held.
  //
  // ASP has no staleness bound, but without any bound a fast worker floods a slow one's network
  // buffers (unexpected MPI messages) and memory grows without limit: found by scripts/soak.sh
  // with 8 ranks on 2 cores. So ASP keeps a flow-control window of runtime.asp_window clocks.
  int64_t bound() const { return cfg.sfb.asp() ? cfg.runtime.asp_window : cfg.sfb.staleness; }
  // The baselines have no read-my-writes: a worker's own update comes back with everyone's.
  bool allowed(int64_t c) const {
    if (!exchange && applied[static_cast<size_t>(rank)] < c) return false;
    for (int q : sources)
      if (applied[static_cast<size_t>(q)] < c - bound()) return false;
    return true;
  }

  // Bytes this rank sent and received, and its compute / update / wait seconds so far, into an
  // EvalRecord or RankStats.
  template <typename Record>
  void fill_traffic_and_times(Record& r) const {
    const auto c = t.total_counters();
    r.bytes_sent = c.bytes_sent;
    r.bytes_received = c.bytes_received;
    r.compute_s = to_s(compute_ns);
    r.update_s = to_s(update_ns);
    r.wait_s = to_s(wait_ns);
  }

  // Who clock c waits for, for the timeout message. Called with mu held.
  std::string waiting_for(int64_t c) const {
    if (paused) return "no STOP_AT from rank 0 after its stop query";
    std::vector<std::string> late;
    for (int q : sources) {
      const int64_t need = (q == rank && !exchange) ? c : c - bound();
      // Under BSP complete clocks are applied together: the late ranks are those whose batches
      // have not even arrived.
      if (applied[static_cast<size_t>(q)] < need && received[static_cast<size_t>(q)] < need)
        late.push_back(fmt::format("rank {} (received {} of {} clocks)", q, received[static_cast<size_t>(q)], need));
    }
    if (late.empty()) return "every batch it needs has arrived but is not applied yet";
    return fmt::format("no progress from {}; is it alive?", fmt::join(late, ", "));
  }

  // The true parameters w_scale * W as a new matrix (a copy of W when w_scale is 1).
  Matrix materialized() const {
    if (w_scale == 1.0f) return W;
    return w_scale * W;
  }
  // Folds w_scale into W. Called with w_mu held exclusively (or after the threads have ended).
  void fold_scale() {
    if (w_scale == 1.0f) return;
    W *= w_scale;
    w_scale = 1.0f;
  }
  // Keeps W's magnitude in float range: folds w_scale in once it leaves [1e-3, 1e3] (rarely, so
  // the prox stays O(1) per batch).
  void fold_scale_if_far() {
    if (w_scale < 1e-3f || w_scale > 1e3f) fold_scale();
  }
  bool scaling_prox = false;  // the model's prox_scale is not constantly 1

  void compute_loop();
  void update_loop();
  void comm_loop();
  void apply(std::span<const SfBatchPtr> batches);
  void apply_dense(const SfBatch& item);
  void maybe_snapshot(int64_t& next_eval, int64_t& next_ckpt, bool final);
  RankStats collect_stats();
};

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
  for (int64_t c = start_clock;; ++c) {
    {
      std::unique_lock lock(mu);
      Stopwatch waited;
      auto ready = [&] { return aborted || c >= stop_at || (!paused && allowed(c)); };
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(cfg.runtime.peer_timeout_s);
      while (!ready()) {
        if (cv.wait_until(lock, deadline) == std::cv_status::timeout && !ready())
          throw CommError(fmt::format("rank {}: waited {} s (runtime.peer_timeout_s) to start clock {}: {}", rank,
                                      cfg.runtime.peer_timeout_s, c, waiting_for(c)));
      }
      wait_ns += to_ns(waited.seconds());
      if (aborted) return;
      if (c >= stop_at) {
        compute_done = true;
        break;
      }
      started = c + 1;
      for (int q : sources) max_lead = std::max(max_lead, c - applied[static_cast<size_t>(q)]);
    }
    if (hooks.on_clock_start) hooks.on_clock_start(c);
    Stopwatch sw;
    sampler.next(K, rows);
    api::gather(train, rows, batch);
    batch.clock = c;
    writer.begin(rank, c, K, gradient ? -step(c) / static_cast<float>(K) : 1.0f, sparse_v);
    {
      std::shared_lock lock(w_mu);
      model.compute_sf(api::Weights{W, w_scale}, batch, writer);
    }
    SFB_CHECK(writer.committed() && committed, "model \"{}\" returned from compute_sf without commit() at clock {}",
              model.name(), c);
    {
      std::lock_guard lock(mu);
      ++received[static_cast<size_t>(rank)];
    }
    // SFB applies its own batch like everyone's; a baseline gets it back inside the exchanged update.
    if (!exchange) in_q.push(committed);
    out_q.push(std::move(committed));
    compute_ns += to_ns(sw.seconds());
    if (rank == cfg.runtime.slow_rank && cfg.runtime.slow_ms > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(cfg.runtime.slow_ms * 1000)));
  }
  in_q.push(nullptr);
}

void Worker::State::apply(std::span<const SfBatchPtr> batches) {
  if (batches.empty()) return;
  std::vector<const SfBatch*>& raw = apply_raw;
  raw.clear();
  for (const auto& b : batches) raw.push_back(b.get());
  Stopwatch sw;
  {
    std::unique_lock lock(w_mu);
    if (!scaling_prox) {
      // One sweep over W for all of them (update_applier.h), then each batch's proximal step.
      applier_ptr->apply(W, raw);
      if (model.has_prox())
        for (const SfBatch* b : raw) model.prox(W, step(b->clock));
    } else {
      // W_true = w_scale * W. Batch b adds dW_b, then shrinks by c_b = prox_scale(eta_b):
      // W += dW_b / w_scale; w_scale *= c_b. All batches still go in one sweep, each with its own
      // multiplier; W is rescaled only when w_scale drifts far from 1 (rarely), so a prox step is O(1).
      apply_alpha.clear();
      float s = w_scale;
      for (const SfBatch* b : raw) {
        apply_alpha.push_back(1.0f / s);
        s *= static_cast<float>(model.prox_scale(step(b->clock)));
      }
      applier_ptr->apply(W, raw, apply_alpha);
      w_scale = s;
      fold_scale_if_far();
      if (model.has_prox()) {
        fold_scale();
        for (const SfBatch* b : raw) model.prox(W, step(b->clock));
      }
    }
  }
  update_ns += to_ns(sw.seconds());
  std::lock_guard lock(mu);
  for (const SfBatch* b : raw) {
    pairs_applied_from[static_cast<size_t>(b->sender)] += b->count;
    // Batches of one sender arrive in clock order (FIFO transport, one sender thread): a gap or
    // a repeat means a lost or duplicated message.
    if (b->clock != applied[static_cast<size_t>(b->sender)])
      throw CommError(fmt::format("rank {}: batch of clock {} from rank {} out of sequence (expected clock {})", rank,
                                  b->clock, b->sender, applied[static_cast<size_t>(b->sender)]));
    ++applied[static_cast<size_t>(b->sender)];
  }
  cv.notify_all();
}

void Worker::State::apply_dense(const SfBatch& item) {
  SFB_ENFORCE(item.dense && item.dense->rows() == J && item.dense->cols() == D, "dense item of clock {}", item.clock);
  Stopwatch sw;
  {
    std::unique_lock lock(w_mu);
    if (item.kind == SfBatch::Kind::kReplaceW) {
      // The parameter servers' W after every worker's clock item.clock.
      W = *item.dense;
      w_scale = 1.0f;
    } else {
      // The sum of every worker's update of the clock, then one proximal step per worker's batch
      // (as SFB applies one per batch).
      const double eta = step(item.clock);
      if (!scaling_prox) {
        W += *item.dense;
      } else {
        W += (1.0f / w_scale) * *item.dense;
        for (int q = 0; q < P; ++q) w_scale *= static_cast<float>(model.prox_scale(eta));
        fold_scale_if_far();
      }
      if (model.has_prox()) {
        fold_scale();
        for (int q = 0; q < P; ++q) model.prox(W, eta);
      }
    }
  }
  update_ns += to_ns(sw.seconds());
  std::lock_guard lock(mu);
  for (int q : sources) {
    if (applied[static_cast<size_t>(q)] != item.clock)
      throw CommError(fmt::format("rank {}: {} update of clock {} out of sequence (expected clock {})", rank,
                                  exchange ? exchange->name() : "dense", item.clock, applied[static_cast<size_t>(q)]));
    applied[static_cast<size_t>(q)] = item.clock + 1;
    pairs_applied_from[static_cast<size_t>(q)] += K;
  }
  cv.notify_all();
}

void Worker::State::maybe_snapshot(int64_t& next_eval, int64_t& next_ckpt, bool final) {
  if (rank != 0 || !monitor) return;
  const bool checkpoints = !cfg.checkpoint.path.empty();
  int64_t done;
  {
    std::lock_guard lock(mu);
    done = stop_at;
  }
  bool evaluate = true, checkpoint = checkpoints;
  if (!final) {
    done = std::numeric_limits<int64_t>::max();
    for (int q : sources) done = std::min(done, applied[static_cast<size_t>(q)]);
    evaluate = done >= next_eval;
    checkpoint = checkpoints && done >= next_ckpt;
    if (!evaluate && !checkpoint) return;
    while (next_eval <= done) next_eval += cfg.eval.every;
    while (checkpoint && next_ckpt <= done) next_ckpt += cfg.checkpoint.every;
  }
  auto s = std::make_unique<Snapshot>();
  s->final = final;
  s->evaluate = evaluate;
  s->checkpoint = checkpoint;
  s->W = materialized();
  auto& r = s->record;
  r.clock = done;
  r.seconds = since_start.seconds();
  r.samples_per_s = r.seconds > 0 ? static_cast<double>(done) * P * K / r.seconds : 0.0;
  fill_traffic_and_times(r);
  monitor->submit(std::move(s));
}

void Worker::State::update_loop() {
  const bool bsp = cfg.sfb.staleness == 0;
  std::map<std::pair<int64_t, int>, SfBatchPtr> pending;  // BSP: (clock, sender) -> batch
  int64_t next_clock = start_clock;
  int64_t next_eval = (start_clock / cfg.eval.every + 1) * cfg.eval.every;
  int64_t next_ckpt = cfg.checkpoint.every > 0 ? (start_clock / cfg.checkpoint.every + 1) * cfg.checkpoint.every
                                               : std::numeric_limits<int64_t>::max();
  std::vector<SfBatchPtr> group;  // batches applied together
  // Rank 0 evaluates the starting point too: the first point of every objective-vs-time curve.
  if (rank == 0 && monitor) {
    auto snap = std::make_unique<Snapshot>();
    snap->W = materialized();
    snap->record.clock = start_clock;
    fill_traffic_and_times(snap->record);
    monitor->submit(std::move(snap));
  }
  for (;;) {
    SfBatchPtr b;
    in_q.pop(b);
    if (aborted) return;
    if (b && b->kind != SfBatch::Kind::kSf) {
      apply_dense(*b);
      if (hooks.on_clock_applied) {
        std::shared_lock lock(w_mu);
        hooks.on_clock_applied(b->clock, W);
      }
      maybe_snapshot(next_eval, next_ckpt, false);
    } else if (b) {
      group.clear();
      if (!bsp) {
        // SSP/ASP: apply what has arrived, up to one batch per source, in one sweep.
        group.push_back(std::move(b));
        while (group.size() < sources.size() && in_q.try_pop(b)) {
          if (!b) break;  // a wake-up: the termination check below runs anyway
          group.push_back(std::move(b));
        }
        apply(group);
      } else {
        if (!pending.emplace(std::make_pair(b->clock, b->sender), b).second)
          throw CommError(fmt::format("rank {}: duplicate batch of clock {} from rank {}", rank, b->clock, b->sender));
        // Apply clock next_clock once every source's batch is here, in sender-rank order.
        for (;;) {
          bool complete = true;
          for (int q : sources) complete = complete && pending.count({next_clock, q}) > 0;
          if (!complete) break;
          group.clear();
          for (int q : sources) {
            auto it = pending.find({next_clock, q});
            group.push_back(std::move(it->second));
            pending.erase(it);
          }
          apply(group);
          if (hooks.on_clock_applied) {
            std::shared_lock lock(w_mu);
            hooks.on_clock_applied(next_clock, W);
          }
          ++next_clock;
        }
      }
      maybe_snapshot(next_eval, next_ckpt, false);
    }
    std::lock_guard lock(mu);
    if (!compute_done) continue;
    bool all = true;
    for (int q : sources) all = all && applied[static_cast<size_t>(q)] >= stop_at;
    if (all) break;
  }
  maybe_snapshot(next_eval, next_ckpt, true);
  std::lock_guard lock(mu);
  update_done = true;
}

RankStats Worker::State::collect_stats() {
  RankStats s;
  s.rank = rank;
  s.clocks = stop_at;
  for (auto v : pairs_sent_to) s.pairs_sent += v;
  s.pairs_received = pairs_received;
  for (auto v : pairs_applied_from) s.pairs_applied += v;
  s.checksum = matrix_checksum(materialized());
  for (int q = P; q < t.size(); ++q) s.bytes_from_servers += t.counters(q).bytes_received;
  fill_traffic_and_times(s);
  s.max_lead = max_lead;
  return s;
}

void Worker::State::comm_loop() {
  const auto& out = topo.out[static_cast<size_t>(rank)];
  const auto& in = topo.in[static_cast<size_t>(rank)];
  auto send_control = [&](int dst, ControlType type, int64_t value, std::vector<int64_t> payload = {}) {
    t.send(dst, comm::kTagControl, comm::encode_control({type, rank, value, std::move(payload)}));
  };
  bool stop_asked = false;      // this rank has asked (or, on rank 0, started) the stop protocol
  bool query_open = false;      // rank 0: STOP_QUERY sent, replies pending
  int replies = 0;
  int64_t max_started = 0;
  bool sent_done = false;
  bool got_final = false;
  int dones = 0;
  std::vector<char> got_done(static_cast<size_t>(P), 0);
  Stopwatch last_progress;

  // Rank 0 opens the stop protocol: pause everyone, collect the clocks they started.
  auto start_stop = [&](const std::string& reason) {
    if (stop_asked) return;
    stop_asked = true;
    stop_reason = reason;
    spdlog::info("stopping: {}", reason);
    {
      std::lock_guard lock(mu);
      paused = true;
      max_started = started;
    }
    query_open = true;
    replies = 0;
    for (int q = 1; q < P; ++q) send_control(q, ControlType::kStopQuery, 0);
  };
  auto close_query = [&] {
    // Every rank computes up to the furthest clock any rank had started.
    std::lock_guard lock(mu);
    const int64_t at = std::min(max_started, stop_at);
    stop_at = at;
    paused = false;
    cv.notify_all();
    query_open = false;
    for (int q = 1; q < P; ++q) send_control(q, ControlType::kStopAt, at);
  };

  if (exchange) {
    ExchangeHost host;
    host.transport = &t;
    host.workers = P;
    host.J = J;
    host.D = D;
    host.start_clock = start_clock;
    host.initial_W = &W;  // the update thread has not started to write it (it waits for batches)
    host.deliver = [this](SfBatchPtr item) { in_q.push(std::move(item)); };
    host.fail = [this](std::exception_ptr e) { fail(e); };
    exchange->start(host);
  }
  for (int idle = 0; !aborted;) {
    bool progress = false;
    // 1. Own batches: a baseline's exchange takes them; SFB serialises each once and sends the
    //    same buffer to every out-neighbour.
    SfBatchPtr b;
    while (exchange && out_q.try_pop(b)) {
      exchange->send_own(b);
      progress = true;
    }
    while (!exchange && out_q.try_pop(b)) {
      auto buf = std::make_shared<const comm::Bytes>(comm::encode_sf_batch(*b));
      for (int q : out) {
        t.send_shared(q, comm::kTagSf, buf);
        pairs_sent_to[static_cast<size_t>(q)] += b->count;
      }
      progress = true;
    }
    // 2. Everything that arrived.
    while (auto m = t.try_recv()) {
      progress = true;
      if (exchange && exchange->handles(m->tag)) {
        exchange->on_message(std::move(*m));
        continue;
      }
      if (m->tag == comm::kTagSf) {
        if (exchange || std::find(in.begin(), in.end(), m->src) == in.end())
          throw CommError(fmt::format("rank {}: SF batch from rank {}, which is not an in-neighbour", rank, m->src));
        auto batch = std::make_shared<const SfBatch>(comm::decode_sf_batch(m->data, {m->src, J, D}));
        pairs_received += batch->count;
        {
          // FIFO per sender: a clock out of order means a lost or duplicated message.
          std::lock_guard lock(mu);
          if (batch->clock != received[static_cast<size_t>(m->src)])
            throw CommError(fmt::format("rank {}: SF batch of clock {} from rank {}, expected clock {}: a message "
                                        "was lost or duplicated",
                                        rank, batch->clock, m->src, received[static_cast<size_t>(m->src)]));
          ++received[static_cast<size_t>(m->src)];
        }
        in_q.push(std::move(batch));
        continue;
      }
      if (m->tag != comm::kTagControl)
        throw CommError(fmt::format("rank {}: message with unexpected tag {} from rank {}", rank, m->tag, m->src));
      const ControlMsg c = comm::decode_control(m->data, m->src);
      const bool root_only = c.type == ControlType::kStopRequest || c.type == ControlType::kStopReply ||
                             c.type == ControlType::kDone;
      if (root_only != (rank == 0))
        throw CommError(fmt::format("rank {}: control message type {} from rank {} is not meant for this rank", rank,
                                    static_cast<int>(c.type), m->src));
      switch (c.type) {
        case ControlType::kStopRequest:
          start_stop(fmt::format("rank {} received signal {}", m->src, c.value));
          break;
        case ControlType::kStopQuery: {
          int64_t s;
          {
            std::lock_guard lock(mu);
            paused = true;
            s = started;
          }
          send_control(0, ControlType::kStopReply, s);
          break;
        }
        case ControlType::kStopReply:
          if (!query_open) throw CommError(fmt::format("rank 0: unexpected STOP_REPLY from rank {}", m->src));
          max_started = std::max(max_started, c.value);
          if (++replies == P - 1) close_query();
          break;
        case ControlType::kStopAt: {
          std::lock_guard lock(mu);
          if (c.value < started)
            throw CommError(fmt::format("rank {}: STOP_AT {} is before clock {} already started", rank, c.value, started));
          stop_at = std::min(stop_at, c.value);
          paused = false;
          cv.notify_all();
          break;
        }
        case ControlType::kDone:
          all_stats[static_cast<size_t>(m->src)] = unpack_stats(m->src, c.payload);
          got_done[static_cast<size_t>(m->src)] = 1;
          ++dones;
          break;
        case ControlType::kFinal:
          got_final = true;
          break;
      }
    }
    // 3. Reasons to stop early.
    if (!stop_asked && !(rank != 0 && sent_done)) {
      if (const int sig = stop_signal(); sig != 0) {
        if (rank == 0) {
          start_stop(fmt::format("signal {}", sig));
        } else {
          stop_asked = true;
          send_control(0, ControlType::kStopRequest, sig);
        }
      } else if (rank == 0) {
        std::string reason = monitor ? monitor->stop_reason() : std::string();
        if (reason.empty() && cfg.stop.max_seconds > 0 && since_start.seconds() > cfg.stop.max_seconds) reason = "max_seconds";
        if (!reason.empty()) start_stop(reason);
      }
      if (rank == 0 && query_open && P == 1) close_query();
    }
    // 4. Done locally: report to rank 0; rank 0 ends the job when everyone has.
    if (!sent_done) {
      bool local_done;
      {
        std::lock_guard lock(mu);
        local_done = compute_done && update_done;
      }
      if (local_done && out_q.empty()) {
        sent_done = true;
        if (rank == 0) all_stats[0] = collect_stats();
        else send_control(0, ControlType::kDone, 0, pack_stats(collect_stats()));
        progress = true;
      }
    }
    if (rank == 0 && sent_done && dones == P - 1 && !query_open) {
      for (int q = 1; q < P; ++q) send_control(q, ControlType::kFinal, 0);
      break;
    }
    if (rank != 0 && sent_done && got_final) break;
    // Waiting on peers for the end of the job or a stop reply: give up after peer_timeout_s.
    if (progress) {
      last_progress.reset();
    } else if ((sent_done || query_open) && last_progress.seconds() > cfg.runtime.peer_timeout_s) {
      std::string who;
      if (query_open) who = "STOP_REPLY messages";
      else if (rank == 0) {
        std::vector<int> missing;
        for (int q = 1; q < P; ++q)
          if (!got_done[static_cast<size_t>(q)]) missing.push_back(q);
        who = fmt::format("DONE from ranks {}", fmt::join(missing, ", "));
      } else {
        who = "FINAL from rank 0";
      }
      throw CommError(fmt::format("rank {}: no {} for {} s (runtime.peer_timeout_s)", rank, who, cfg.runtime.peer_timeout_s));
    }
    // Idle: yield first, then sleep briefly (no busy polling against the compute threads).
    if (progress) {
      idle = 0;
    } else if (++idle < 16) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(200, 10 * (idle - 15))));
    }
  }
  if (exchange && !aborted) exchange->finish();
  t.flush();
}

Worker::Worker(const Config& cfg, comm::Transport& transport, const io::Dataset& train, const io::Dataset* test,
               api::Model& model, WorkerHooks hooks, WorkerStart start, Exchange* exchange)
    : s_(std::make_unique<State>(cfg, transport, train, test, model, std::move(hooks), exchange)) {
  auto& s = *s_;
  SFB_CHECK((cfg.comm.scheme == "sfb") == (exchange == nullptr), "comm.scheme = \"{}\" needs {}", cfg.comm.scheme,
            exchange ? "no exchange" : "its baseline exchange (sfb::baselines::make_exchange)");
  SFB_CHECK(s.rank < s.P, "rank {} is a parameter server, not a worker", s.rank);
  s.threads = std::max<int>(1, static_cast<int>(cfg.runtime.threads));
  s.applier_ptr = std::make_unique<UpdateApplier>(s.threads);
  s.J = static_cast<int32_t>(model.rows());
  s.D = static_cast<int32_t>(model.cols());
  // Probe: a model whose prox_scale(step) is 1 at the first step has no scaling prox.
  s.scaling_prox = model.prox_scale(s.step(0)) != 1.0;
  s.K = static_cast<int32_t>(cfg.optimizer.minibatch);
  if (start.W) {
    SFB_CHECK(start.W->rows() == s.J && start.W->cols() == s.D,
              "the checkpoint's W is {} x {} but model \"{}\" on this data needs {} x {}", start.W->rows(),
              start.W->cols(), model.name(), s.J, s.D);
    s.W = *start.W;
  } else {
    s.W = Matrix::Zero(s.J, s.D);
    Rng init_rng = make_rng(cfg.job.seed, 0x1417);
    model.init(s.W, init_rng);
  }
  SFB_CHECK(start.clock >= 0 && start.clock < cfg.stop.max_clocks,
            "training would start at clock {}, but stop.max_clocks is {}: raise stop.max_clocks to continue", start.clock,
            cfg.stop.max_clocks);
  s.start_clock = start.clock;
  s.sources = s.topo.in[static_cast<size_t>(s.rank)];
  s.sources.push_back(s.rank);
  std::sort(s.sources.begin(), s.sources.end());
  s.applied.assign(static_cast<size_t>(s.P), s.start_clock);
  s.received.assign(static_cast<size_t>(s.P), s.start_clock);
  s.started = s.start_clock;
  s.pairs_sent_to.assign(static_cast<size_t>(s.P), 0);
  s.pairs_applied_from.assign(static_cast<size_t>(s.P), 0);
  s.stop_at = cfg.stop.max_clocks;
  s.out_q.set_capacity(cfg.runtime.queue_capacity);
  // The in-queue holds this rank's batches plus every peer's: the compute thread and the
  // communication thread must never block each other on it for long.
  s.in_q.set_capacity(cfg.runtime.queue_capacity * s.P);
  if (s.rank == 0) {
    s.all_stats.resize(static_cast<size_t>(s.P));
    s.monitor = std::make_unique<ObjectiveMonitor>(cfg, model, train, test, s.P);
  }
}

Worker::~Worker() = default;

WorkerResult Worker::run() {
  auto& s = *s_;
  s.since_start.reset();
  if (s.monitor) s.monitor->start();
  auto guarded = [&s](void (State::*fn)()) {
    return std::thread([&s, fn] {
      try {
        (s.*fn)();
      } catch (const tbb::user_abort&) {
        // Another thread failed first and aborted the queues.
      } catch (...) {
        s.fail(std::current_exception());
      }
    });
  };
  std::thread compute = guarded(&State::compute_loop);
  std::thread update = guarded(&State::update_loop);
  std::thread comm = guarded(&State::comm_loop);
  compute.join();
  update.join();
  comm.join();
  if (s.monitor) {
    if (s.aborted) s.monitor->abort();
    try {
      s.monitor->finish();
    } catch (...) {
      s.fail(std::current_exception());
    }
  }
  if (s.error) std::rethrow_exception(s.error);

  WorkerResult r;
  r.seconds = s.since_start.seconds();
  r.self = s.collect_stats();
  s.fold_scale();
  r.W = std::move(s.W);
  r.pairs_sent_to = s.pairs_sent_to;
  r.pairs_applied_from = s.pairs_applied_from;
  r.start_clock = s.start_clock;
  r.final_clock = s.stop_at;
  if (s.rank == 0) {
    r.all = s.all_stats;
    r.evals = s.monitor->records();
    r.stop_reason = s.stop_reason;
  }
  return r;
}

}  // namespace sfb::runtime
