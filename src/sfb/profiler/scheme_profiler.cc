#include "sfb/runtime/scheme_profiler.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "sfb/api/batch_sf_writer.h"
#include "sfb/api/minibatch.h"
#include "sfb/comm/allreduce.h"
#include "sfb/comm/channel.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/comm/sf_codec.h"
#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/core/rng.h"
#include "sfb/core/timer.h"
#include "sfb/io/sampler.h"
#include "sfb/runtime/update_applier.h"
#include "sfb/runtime/worker.h"

namespace sfb::runtime {
namespace {

// The slowest rank's median of `times`.
double slowest(comm::Transport& t, std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const auto ns = static_cast<int64_t>(times[times.size() / 2] * 1e9);
  int64_t worst = 0;
  for (int64_t v : comm::allgather_i64(t, ns)) worst = std::max(worst, v);
  return static_cast<double>(worst) * 1e-9;
}

// The slowest rank's median of `repeats` timings of f (seconds); every rank calls it.
template <typename F>
double slowest_median(comm::Transport& t, int repeats, F&& f) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    Stopwatch sw;
    f();
    times.push_back(sw.seconds());
  }
  return slowest(t, std::move(times));
}

// Least squares of (bytes, seconds) as microseconds = a + b bytes.
predict::LineFit fit_us(const std::vector<std::pair<double, double>>& xs) {
  std::vector<double> x, y;
  for (const auto& [bytes, sec] : xs) {
    x.push_back(bytes);
    y.push_back(sec * 1e6);
  }
  return predict::fit_line(x, y);
}

// The model's compute_sf of K samples of this rank's partition on the profile's own W, `repeats`
// times (the slowest rank's median, into p.sf_s); returns the last batch.
SfBatchPtr time_sf(const ProfileRequest& r, const Matrix& stored, predict::SchemeProfile& p) {
  const auto& cfg = *r.cfg;
  auto& model = *r.model;
  const auto K = cfg.optimizer.minibatch;
  io::EpochSampler sampler(r.train->n, cfg.job.seed, static_cast<uint64_t>(r.transport->rank()));
  api::MiniBatch batch;
  std::vector<int64_t> rows;
  SfBatchPtr committed;
  api::BatchSfWriter writer(model.rows(), model.cols(), [&committed](SfBatchPtr b) { committed = std::move(b); });
  const bool gradient = model.update_rule() == api::UpdateRule::kGradientStep;
  const api::Weights W{stored, 1.0f, model.layout()};
  int64_t clock = 0;
  p.sf_s = slowest_median(*r.transport, r.repeats, [&] {
    sampler.next(K, rows);
    api::gather(*r.train, rows, batch);
    batch.clock = clock;
    writer.begin(r.transport->rank(), clock++, static_cast<int32_t>(K),
                 gradient ? -static_cast<float>(cfg.optimizer.lr) / static_cast<float>(K) : 1.0f, model.sparse_v());
    model.compute_sf(W, batch, writer);
    SFB_CHECK(writer.committed() && committed, "model \"{}\" returned from compute_sf without commit()", model.name());
  });
  return committed;
}

// What the engine measured for a few BSP clocks of one scheme, the slowest rank's.
struct EngineClocks {
  double clock_s = 0, compute_s = 0, apply_s = 0;
};

// The engine itself (runtime::Worker: its three threads, queues and stop protocol) for repeats + 4
// BSP clocks of `scheme` (sfb full broadcast without an exchange, else the exchange's baseline) on
// the profile's model, nothing written: the steady seconds per clock (from clock 2's start to the
// last's: connections, first touches and TCP's slow start left out), the compute thread's median
// compute over the same clocks and the update thread's seconds per clock. What the pieces measured
// alone miss (the threads' polling and locking, the transport's threads, the ranks' phases
// interleaving on shared cores) is in them.
EngineClocks time_engine(const ProfileRequest& r, const std::string& scheme, Exchange* exchange) {
  Config cfg = *r.cfg;
  cfg.comm.scheme = scheme;
  cfg.sfb.broadcast = "full";
  cfg.sfb.staleness = 0;
  cfg.sfb.reconcile = "off";
  cfg.stop = StopConfig{};
  cfg.stop.max_clocks = r.repeats + 4;
  cfg.stop.divergence_factor = 0;
  cfg.eval.every = cfg.stop.max_clocks + 1;
  cfg.checkpoint.every = 0;
  cfg.output.metrics = cfg.output.model = cfg.output.summary = "";
  std::vector<double> starts, computes;
  Stopwatch since;
  WorkerHooks hooks;
  hooks.on_clock_start = [&](int64_t) { starts.push_back(since.seconds()); };
  hooks.on_clock_committed = [&](int64_t) { computes.push_back(since.seconds() - starts.back()); };
  const WorkerResult res = Worker(cfg, *r.transport, *r.train, nullptr, *r.model, hooks, {}, exchange).run();
  SFB_CHECK(starts.size() >= 4 && computes.size() == starts.size(), "profile: the {} engine ran {} clocks of {}",
            scheme, starts.size(), cfg.stop.max_clocks);
  computes.erase(computes.begin(), computes.begin() + 2);
  auto& t = *r.transport;
  EngineClocks e;
  e.clock_s = slowest(t, {(starts.back() - starts[2]) / static_cast<double>(starts.size() - 3)});
  e.compute_s = slowest(t, computes);
  e.apply_s = slowest(t, {res.self.update_s / static_cast<double>(starts.size())});
  return e;
}

// The SFB engine's pieces (the network as what the clock leaves of compute and apply), and the
// all-reduce baseline's clock when the request can make its exchange.
void time_engines(const ProfileRequest& r, predict::SchemeProfile& p) {
  const EngineClocks sfb = time_engine(r, "sfb", nullptr);
  p.engine_clock_s = sfb.clock_s;
  p.engine_sf_s = sfb.compute_s;
  p.engine_apply_s = sfb.apply_s;
  p.engine_comm_s = std::max(0.0, sfb.clock_s - sfb.compute_s - sfb.apply_s);
  if (!r.make_allreduce_exchange) return;
  auto ex = r.make_allreduce_exchange();
  p.engine_allreduce_clock_s = time_engine(r, "allreduce", ex.get()).clock_s;
}

// Every rank sends `bytes` to every other at once and receives theirs (on kTagSf: nothing else
// runs yet), as the SFB communication thread does with one clock's batch.
void broadcast_round(comm::Transport& t, const std::shared_ptr<const Bytes>& buf) {
  for (int q = 1; q < t.size(); ++q) t.send_shared((t.rank() + q) % t.size(), comm::kTagSf, buf);
  for (int q = 1; q < t.size(); ++q) t.recv(comm::kTagSf);
}

// a + b M from (bytes, seconds) points; when noise gives no positive slope (small messages on an
// idle link), the largest point's time per byte with a = 0.
predict::LineFit robust_fit(const std::vector<std::pair<double, double>>& xs) {
  predict::LineFit f = fit_us(xs);
  if (std::isfinite(f.b) && f.b > 0 && std::isfinite(f.a)) return f;
  const auto& [bytes, sec] = xs.back();
  return {0.0, sec * 1e6 / bytes, 0.0};
}

void measure_links(const ProfileRequest& r, predict::SchemeProfile& p) {
  auto& t = *r.transport;
  const int P = r.workers;
  if (P < 2) return;
  // A small message for the start-up a, and the batch's size for b (at least 1 MiB: measurable).
  std::vector<std::pair<double, double>> bc;
  const int64_t top = std::clamp<int64_t>(p.batch_bytes, 1 << 20, 16 << 20);
  for (int64_t m : {int64_t{16} << 10, top / 4, top}) {
    const auto buf = std::make_shared<const Bytes>(static_cast<size_t>(m), std::byte{1});
    broadcast_round(t, buf);  // warm-up (connections, TCP windows)
    bc.emplace_back(static_cast<double>(m), slowest_median(t, r.repeats, [&] { broadcast_round(t, buf); }));
  }
  const auto f = robust_fit(bc);
  p.link = {"fitted", std::max(0.0, f.a), f.b / (P - 1)};
  p.bcast_r2 = f.r2;
  comm::TransportChannel ch(t, comm::kTagReduce);
  comm::RankOrderAllreduce ar(ch, P);
  ar.set_cost(LinkCost{p.link.a_us, p.link.b_us_per_byte});
  const int64_t w_bytes = std::clamp<int64_t>(4 * p.J * p.D, 1 << 20, 32 << 20);
  std::vector<std::pair<double, double>> ars;
  int64_t id = 0;
  for (int64_t m : {w_bytes / 4, w_bytes}) {
    std::vector<float> data(static_cast<size_t>(m / 4), 1.0f);
    ar.run(data, id++);
    ars.emplace_back(static_cast<double>(m), slowest_median(t, r.repeats, [&] { ar.run(data, id++); }));
  }
  const auto g = robust_fit(ars);
  p.allreduce_a_us = g.a;
  p.allreduce_b_us_per_byte = g.b;
  p.allreduce_r2 = g.r2;
}

// Ranks whose process runs on this machine's kernel (the same boot id): they share its cores even
// when MPI sees them on different hosts (network namespaces with their own hostnames: the netns
// cluster). `fallback` (MPI's ranks on this host) when the boot id cannot be read.
int ranks_on_machine(comm::Transport& t, int fallback) {
  std::string id;  // procfs files report size 0: read as a stream
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, id);
  const auto mine = static_cast<int64_t>(id.empty() ? 0 : fnv1a64(id) >> 1);
  int same = 0;
  for (int64_t v : comm::allgather_i64(t, mine)) same += v == mine;
  return mine == 0 ? fallback : std::max(same, fallback);
}

}  // namespace

predict::SchemeProfile measure_scheme_profile(const ProfileRequest& r) {
  SFB_CHECK(r.cfg && r.transport && r.model && r.train, "measure_scheme_profile: incomplete request");
  const auto& cfg = *r.cfg;
  auto& model = *r.model;
  predict::SchemeProfile p;
  p.config = cfg.source;
  p.model = model.name();
  p.workers = r.workers;
  p.ranks_on_host = ranks_on_machine(*r.transport, r.ranks_on_host);
  p.cores = std::max(1, r.cores);
  p.threads = static_cast<int>(std::max<int64_t>(1, cfg.runtime.threads));
  p.J = model.rows();
  p.D = model.cols();
  p.K = cfg.optimizer.minibatch;
  p.sparse_v = model.sparse_v();
  // The reconciliation partial broadcast would run (runtime::reconcile_mode under sfb.broadcast = "halton").
  p.reconcile = cfg.sfb.reconcile == "auto"  ? (cfg.sfb.staleness == 0 ? "mean" : "")
                : cfg.sfb.reconcile == "off" ? ""
                                             : cfg.sfb.reconcile;
  p.reconcile_every = cfg.sfb.reconcile_every;
  const Layout layout = model.layout();
  Matrix stored = Matrix::Zero(stored_rows(layout, p.J, p.D), stored_cols(layout, p.J, p.D));
  Rng rng = make_rng(cfg.job.seed, static_cast<uint64_t>(r.transport->rank()));
  model.init(MatrixMap(stored.data(), stored.rows(), stored.cols()), rng);
  if (r.workers > 1) time_engines(r, p);
  const SfBatchPtr batch = time_sf(r, stored, p);
  p.batch_bytes = static_cast<int64_t>(comm::encode_sf_batch(*batch).size());
  p.v_nonzeros = static_cast<double>(batch->nnz_v()) / std::max(1, batch->count);
  // The applier on 1 and m copies of the batch, on a scratch W.
  UpdateApplier applier(p.threads, layout);
  Matrix scratch = stored;
  const int m = std::clamp(r.workers, 2, 8);
  // m distinct copies, as m senders' batches are (one buffer read m times would stay in cache).
  std::vector<SfBatch> copies(static_cast<size_t>(m), *batch);
  std::vector<const SfBatch*> many;
  for (const auto& c : copies) many.push_back(&c);
  const double one = slowest_median(*r.transport, r.repeats, [&] { applier.apply(scratch, *batch); });
  const double lots = slowest_median(*r.transport, r.repeats, [&] { applier.apply(scratch, many); });
  p.apply_batch_s = std::max(0.0, (lots - one) / (m - 1));
  p.apply_fixed_s = one - p.apply_batch_s;
  Matrix dW = Matrix::Zero(scratch.rows(), scratch.cols());
  if (r.form_dense) p.form_dense_s = slowest_median(*r.transport, r.repeats, [&] { r.form_dense(*batch, layout, dW); });
  p.add_dense_s = slowest_median(*r.transport, r.repeats, [&] { scratch += dW; });
  measure_links(r, p);
  return p;
}

}  // namespace sfb::runtime
