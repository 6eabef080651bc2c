#include "sfb/profiler/scheme_profiler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <span>
#include <thread>

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "sfb/api/batch_sf_writer.h"
#include "sfb/api/minibatch.h"
#include "sfb/baselines/dense_update.h"
#include "sfb/baselines/fms_exchange.h"
#include "sfb/baselines/fms_server.h"
#include "sfb/baselines/make_exchange.h"
#include "sfb/comm/allreduce.h"
#include "sfb/comm/channel.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/comm/sf_codec.h"
#include "sfb/comm/transport/prefix.h"
#include "sfb/core/collective_cost.h"
#include "sfb/core/error.h"
#include "sfb/core/fit.h"
#include "sfb/core/hash.h"
#include "sfb/core/rng.h"
#include "sfb/core/timer.h"
#include "sfb/io/sampler.h"
#include "sfb/predict/scheme_model.h"
#include "sfb/runtime/model_prox.h"
#include "sfb/runtime/replica_drift.h"
#include "sfb/runtime/update_applier.h"
#include "sfb/runtime/worker.h"

namespace sfb::profiler {

using runtime::Exchange;
using runtime::UpdateApplier;
using runtime::Worker;
using runtime::WorkerHooks;
using runtime::WorkerResult;
namespace {

// The largest of every rank's `v`, in whole `unit`s (the same on every rank: the profile is).
double largest(comm::Transport& t, double v, double unit) {
  int64_t top = 0;
  for (int64_t x : comm::allgather_i64(t, static_cast<int64_t>(v / unit))) top = std::max(top, x);
  return static_cast<double>(top) * unit;
}

// The slowest rank's median of `times`, to the nanosecond.
double slowest(comm::Transport& t, std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return largest(t, times[times.size() / 2], 1e-9);
}

// How a computation is timed. A rank with less than a core (a host's CPU budget, or more ranks than
// cores) computes in the scheduler's slices: under a quota of 1 ms in 8 a piece of a few
// milliseconds ends in whichever slice its work runs out, so its wall time moves by up to a period
// with the phase it starts at (four profiles of the 2048 job on 4 hosts of 0.125 cores, minutes
// apart: apply_batch_s 0.003 to 0.010 s, apply_fixed_s -0.0006 to 0.021 s, where the applier's
// 8 batches a clock at 8 hosts turn that into a quarter of SFB's clock). Such a rank's pieces are
// the process's CPU seconds over its share of a core: the rate that the engine's clocks, many
// periods long, compute at (what predict::pieces_at scales by): the calling thread's CPU seconds
// for a rank of one thread (its BLAS on that thread, as sfbd sets runtime.threads; ranks that are
// threads of one process, as in the tests, each count their own), the process's for a rank of
// several (one rank per process, as mpirun starts them). Where ranks share cores without a quota,
// rank 0's evaluation (the others wait) is counted at the share too: the evaluation's anchor
// measures what it costs the engine.
// A rank with whole cores is timed on the wall; so is anything that waits on the network
// (timed_rounds, the engines).
class PieceClock {
 public:
  PieceClock() = default;  // the wall
  PieceClock(double share, int threads) : share_(share), whole_process_(threads > 1) {}

  template <typename F>
  double seconds(F&& f) const {
    if (!(share_ < 1.0)) {
      const Stopwatch sw;
      f();
      return sw.seconds();
    }
    const double before = cpu_seconds(whole_process_);
    f();
    return (cpu_seconds(whole_process_) - before) / share_;
  }

 private:
  double share_ = 1.0;
  bool whole_process_ = false;
};

// A computation's clock on this profile's ranks (SchemeProfile::rank_cores: set by describe()).
PieceClock piece_clock(const predict::SchemeProfile& p) {
  return PieceClock(std::max(1e-3, p.rank_cores()), p.threads);
}

// The slowest rank's median of `repeats` timings of f (seconds) by `clock`, and of more while
// they add up to under `more_within_s` (at most kPieceRepeats in all): a piece of milliseconds
// gets 15 timings for the 3 of one that takes a second. Every rank calls it (the ranks may time
// different numbers: one collective after them).
constexpr int kPieceRepeats = 15;
template <typename F>
double slowest_median(comm::Transport& t, const PieceClock& clock, int repeats, F&& f, double more_within_s = 0) {
  std::vector<double> times;
  double sum = 0;
  while (static_cast<int>(times.size()) < std::max(1, repeats) ||
         (sum < more_within_s && static_cast<int>(times.size()) < kPieceRepeats)) {
    times.push_back(clock.seconds(f));
    sum += times.back();
  }
  return slowest(t, std::move(times));
}

// What more timings of one piece may take (slowest_median's more_within_s).
constexpr double kPieceMoreS = 0.3;

}  // namespace

int repeats_within(int repeats, double one_s, double allowed_s) {
  if (!(one_s > 0)) return std::max(1, repeats);
  return static_cast<int>(std::clamp(std::floor(allowed_s / one_s), 1.0, static_cast<double>(std::max(1, repeats))));
}

double sf_fixed_seconds(double sf_s, double half_s, int64_t K) {
  if (K < 2 || !(sf_s > 0)) return 0.0;
  const double slope = (sf_s - half_s) / static_cast<double>(K - K / 2);
  return std::clamp(sf_s - slope * static_cast<double>(K), 0.0, sf_s);
}

int64_t profiled_minibatch(int64_t K, int64_t probe_K, double probe_s, double budget_s) {
  if (K <= probe_K || probe_K < 1 || !(probe_s > 0) || !(budget_s > 0)) return K;
  const double fit = budget_s / kSfPerBudget / (probe_s / static_cast<double>(probe_K));
  return fit >= static_cast<double>(K) ? K : std::clamp<int64_t>(static_cast<int64_t>(fit), 1, K);
}

namespace {

// Least squares of (bytes, seconds) as microseconds = a + b bytes.
LineFit fit_us(const std::vector<std::pair<double, double>>& xs) {
  std::vector<double> x, y;
  for (const auto& [bytes, sec] : xs) {
    x.push_back(bytes);
    y.push_back(sec * 1e6);
  }
  return fit_line(x, y);
}

// The model's compute_sf of K samples of this rank's partition on the profile's own W, `repeats`
// times or more (slowest_median: the slowest rank's median, into p.sf_s); returns the last batch.
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
  p.sf_s = slowest_median(
      *r.transport, piece_clock(p), r.repeats,
      [&] {
        sampler.next(K, rows);
        api::gather(*r.train, rows, batch);
        batch.clock = clock;
        writer.begin(r.transport->rank(), clock++, static_cast<int32_t>(K),
                     gradient ? -static_cast<float>(cfg.optimizer.lr) / static_cast<float>(K) : 1.0f, model.sparse_v());
        model.compute_sf(W, batch, writer);
        SFB_CHECK(writer.committed() && committed, "model \"{}\" returned from compute_sf without commit()",
                  model.name());
      },
      kPieceMoreS);
  return committed;
}

// What the engine measured for a few BSP clocks of one scheme, the slowest rank's.
struct EngineClocks {
  double clock_s = 0, compute_s = 0, apply_s = 0;
  // clock_s's standard error: a rank's steady clocks' sample deviation over the root of their count,
  // the largest rank's (0 with fewer than two).
  double clock_se_s = 0;
  // The CPU of its communication, ns a byte a rank sent and received (the ranks' mean): the
  // communication thread's and the transport's own threads' CPU seconds over the run (WorkerResult::
  // comm_cpu_s, comm::Transport::own_threads_cpu_seconds: TCP's I/O thread, which the kernel charges
  // for the work on its sockets) over the bytes the rank sent and received in it. 0 where a rank's
  // communication thread polled (MPI's transport: its CPU is what idle time it found).
  double comm_cpu_ns_per_byte = 0;
};

// The standard error of the mean of the clocks from `first` to first + span - 1 (`starts` are their
// start times, one more than the clocks): their sample deviation over the root of their count; 0
// with fewer than two.
double clock_standard_error(const std::vector<double>& starts, int64_t first, int64_t span) {
  if (span < 2) return 0.0;
  const auto at = [&](int64_t c) { return starts[static_cast<size_t>(c)]; };
  const double mean = (at(first + span) - at(first)) / static_cast<double>(span);
  double ss = 0;
  for (int64_t c = first; c < first + span; ++c) ss += (at(c + 1) - at(c) - mean) * (at(c + 1) - at(c) - mean);
  return std::sqrt(ss / static_cast<double>(span - 1) / static_cast<double>(span));
}

// The ranks' mean of v, to a thousandth; 0 when any rank's is below 0 (unknown).
double mean_of_known(comm::Transport& t, double v) {
  double sum = 0;
  for (int64_t x : comm::allgather_i64(t, v < 0 ? -1 : static_cast<int64_t>(std::llround(v * 1e3)))) {
    if (x < 0) return 0.0;
    sum += static_cast<double>(x);
  }
  return sum * 1e-3 / t.size();
}

// The config and start of an engine run of `scheme`: `clocks` clocks (at least 4) of BSP full
// broadcast without reconciliation, stopped by rank 0 after `max_s`, nothing written; with
// eval_every > 0 rank 0's monitor evaluates every eval_every clocks on the job's objective rows.
Config engine_config(const ProfileRequest& r, Scheme scheme, int64_t clocks, double max_s, int64_t eval_every,
                     runtime::WorkerStart& start) {
  Config cfg = runtime::unwatched_run(*r.cfg, 0, std::max<int64_t>(4, clocks));
  cfg.stop.max_seconds = std::max(1e-3, max_s);  // 0 would be no limit
  cfg.comm.scheme = scheme;
  cfg.sfb.broadcast = sfb::Broadcast::kFull;
  cfg.sfb.staleness = 0;
  cfg.sfb.reconcile = Reconcile::kOff;
  start.evaluate_ends = false;  // nothing is written: only the evaluations every eval_every clocks count
  if (eval_every > 0) {
    cfg.eval.every = eval_every;
    start.objective_rows = r.objective_rows;
  }
  return cfg;
}

// The engine itself (runtime::Worker: its three threads, queues and stop protocol) for `clocks`
// (at least 4) BSP clocks of `scheme` (sfb full broadcast without an exchange, else the exchange's baseline) on
// the profile's model, nothing written: the steady seconds per clock (from clock 2's start to the
// last's: connections, first touches and TCP's slow start left out), the compute thread's median
// compute over the same clocks and the update thread's seconds per clock. What the pieces measured
// alone miss (the threads' polling and locking, the transport's threads, the ranks' phases
// interleaving on shared cores) is in them. With eval_every > 0 rank 0's monitor evaluates every
// eval_every clocks as in training (the job's objective rows and test set; nothing written) and the
// steady clock is taken over whole evaluation periods (0 when not one fits after clock 2).
// `after_run` runs on this rank as soon as its engine has returned, before the ranks gather the
// clocks (FMS's profile waits there for its servers: await_servers). The clocks are sized from the
// engine's predicted clock, which its own cost can outrun (the all-reduce engine of the sparse
// 5,000 x 20,000 job on 4 ranks sharing 2 cores: the engines' share of 55 s took 57, the profile
// 61.6 s), so rank 0 also stops the run once `max_s` has passed (stop.max_seconds, as in
// training); a run stopped before 4 clocks measures nothing (0, said so).
EngineClocks time_engine(const ProfileRequest& r, comm::Transport& run_on, Scheme scheme, Exchange* exchange,
                         int64_t clocks, double max_s, int64_t eval_every = 0,
                         const std::function<void()>& after_run = {}) {
  runtime::WorkerStart start;
  const Config cfg = engine_config(r, scheme, clocks, max_s, eval_every, start);
  std::vector<double> starts, computes;
  Stopwatch since;
  WorkerHooks hooks;
  hooks.on_clock_start = [&](int64_t) { starts.push_back(since.seconds()); };
  hooks.on_clock_committed = [&](int64_t) { computes.push_back(since.seconds() - starts.back()); };
  const io::Dataset* test = eval_every > 0 ? r.test : nullptr;
  const double io_cpu_s = run_on.own_threads_cpu_seconds();
  const WorkerResult res = Worker(cfg, run_on, *r.train, test, *r.model, hooks, start, exchange).run();
  // Unknown (-1) where the thread polled, or the transport's clock went back (its thread ended).
  const double io_s = run_on.own_threads_cpu_seconds() - io_cpu_s;
  const double comm_cpu_s = res.comm_cpu_s < 0 || io_s < 0 ? -1.0 : res.comm_cpu_s + io_s;
  if (after_run) after_run();
  SFB_CHECK(computes.size() == starts.size(), "profile: the {} engine committed {} of its {} clocks", scheme,
            computes.size(), starts.size());
  auto& t = *r.transport;
  const auto ran = comm::allgather_i64(t, static_cast<int64_t>(starts.size()));
  if (const int64_t fewest = *std::min_element(ran.begin(), ran.end()); fewest < 4) {
    if (t.rank() == 0)
      spdlog::warn("profile: the {} engine ran {} of {} clocks in its {:.1f} s: not measured", scheme, fewest,
                   cfg.stop.max_clocks, max_s);
    return {};
  }
  computes.erase(computes.begin(), computes.begin() + 2);
  EngineClocks e;
  // Clocks 2 .. last: all of them, or the whole evaluation periods among them.
  const auto last = static_cast<int64_t>(starts.size()) - 1;
  const int64_t span = eval_every > 0 ? (last - 2) / eval_every * eval_every : last - 2;
  if (span <= 0 && t.rank() == 0)
    spdlog::warn("profile: the {} engine ran {} clocks in its {:.1f} s, no whole evaluation period of {}: not measured",
                 scheme, starts.size(), max_s, eval_every);
  const double mine = span > 0 ? (starts[static_cast<size_t>(2 + span)] - starts[2]) / static_cast<double>(span) : 0;
  const double se = clock_standard_error(starts, 2, span);
  e.clock_s = largest(t, mine, 1e-9);
  e.clock_se_s = largest(t, se, 1e-9);
  if (t.rank() == 0 && spdlog::should_log(spdlog::level::debug)) {
    std::string each;
    for (size_t c = 1; c < starts.size(); ++c) each += fmt::format(" {:.3f}", starts[c] - starts[c - 1]);
    spdlog::debug(
        "profile: the {} engine's clocks on rank 0 (s, from clock 0; eval.every {}):{}; steady {:.4f} +- "
        "{:.4f} s (the slowest rank's: {:.4f} +- {:.4f})",
        scheme, eval_every, each, mine, se, e.clock_s, e.clock_se_s);
  }
  e.compute_s = slowest(t, computes);
  e.apply_s = slowest(t, {res.self.update_s / static_cast<double>(starts.size())});
  const auto moved = static_cast<double>(res.self.bytes_sent + res.self.bytes_received);
  e.comm_cpu_ns_per_byte = mean_of_known(t, comm_cpu_s < 0 ? -1.0 : moved > 0 ? comm_cpu_s * 1e9 / moved : 0.0);
  return e;
}

// Engine clocks of a scheme predicted at `clock_s` each: enough for kEngineSteadyS of steady clocks
// (at least repeats + 4, at most kEngineMaxClocks), as many of those as fit in `budget_s` with the
// engine's start and stop (about a clock more: the stop protocol's consensus, the threads' joins);
// 0 when even 4 do not (the same on every rank: the profile is).
int64_t engine_clocks(const ProfileRequest& r, double clock_s, double budget_s) {
  if (!(clock_s > 0)) return r.repeats + 4;
  const int64_t fit = static_cast<int64_t>(budget_s / clock_s) - 1;
  const int64_t want = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(kEngineSteadyS / clock_s)) + 3, r.repeats + 4,
                                           std::max<int64_t>(kEngineMaxClocks, r.repeats + 4));
  return fit < 4 ? 0 : std::min(fit, want);
}

// Clocks of a scheme's engine run again with rank 0's monitor evaluating every eval.every clocks:
// as many whole evaluation periods as fit in `budget_s` (at least one after clock 2), from its
// steady clock without them (`clock_s`) and what evaluations cost a clock: their pieces (as the
// predictor counts them: predict::measured_evals_per_clock_s), or what they cost the SFB engine
// where that was measured and is more (3x the pieces on the validation's hosts: the pieces alone
// would size the run a third too short of its time); 0 when no period
// fits (said so: the evaluations then cost that scheme their pieces). The same on every rank, as
// engine_clocks.
int64_t eval_run_clocks(const ProfileRequest& r, const predict::SchemeProfile& p, Scheme scheme, double clock_s,
                        double budget_s) {
  const int64_t every = p.eval_every;  // the job's eval.every
  if (!(clock_s > 0) || every < 1) return 0;
  const double ev = p.evals_per_clock_s();
  const double with_s = clock_s + std::max(ev, p.anchors().eval * ev);
  const int64_t n = engine_clocks(r, with_s, budget_s);
  const int64_t periods = std::max<int64_t>(1, (n - 3) / every);
  if (static_cast<double>(3 + periods * every + 1) * with_s <= budget_s) return 3 + periods * every;
  if (r.transport->rank() == 0)
    spdlog::info(
        "profile: an evaluation period of the {} engine ({} clocks) does not fit: evaluations cost it their "
        "pieces",
        scheme, every);
  return 0;
}

// Clocks of an engine that runs again with the evaluations after (the all-reduce's, FMS's): as many as
// fit in half of `budget_s`, in all of it when half does not fit 4 (its anchor matters more than
// the evaluations', which then cost their pieces).
struct EngineRun {
  int64_t clocks = 0;  // 0: not run
  double max_s = 0;    // the share they were sized for
};
EngineRun engine_clocks_before_evals(const ProfileRequest& r, double clock_s, double budget_s) {
  if (const int64_t half = engine_clocks(r, clock_s, budget_s / 2)) return {half, budget_s / 2};
  return {engine_clocks(r, clock_s, budget_s), budget_s};
}

// The engine of `scheme` with the evaluations (eval_run_clocks), on `run_on` with `exchange` and
// `after_run` as time_engine: its steady clock over whole evaluation periods, or 0 when none fits.
// `decided` hears first whether it runs (FMS's servers must be told).
EngineClocks time_engine_with_evals(const ProfileRequest& r, const predict::SchemeProfile& p, comm::Transport& run_on,
                                    Scheme scheme, Exchange* exchange, double clock_s, double budget_s,
                                    const std::function<void(bool)>& decided = {},
                                    const std::function<void()>& after_run = {}) {
  const int64_t n = eval_run_clocks(r, p, scheme, clock_s, budget_s);
  if (decided) decided(n > 0);
  return n > 0 ? time_engine(r, run_on, scheme, exchange, n, budget_s, p.eval_every, after_run) : EngineClocks{};
}

// What is left of `budget_s` since `took` started, the slowest rank's view (the same on every rank).
double left_s(const ProfileRequest& r, double budget_s, const Stopwatch& took) {
  return budget_s - largest(*r.transport, took.seconds(), 1e-3);
}

// The SFB engine on the first two ranks alone (one peer each: engine_pair_clock_s) for as many
// clocks as fit in `budget_s`, 0 with fewer than 3 workers or when 4 clocks do not fit; the same
// on every rank. The other ranks send nothing meanwhile (a message of theirs would reach the pair's
// engine): they wait for rank 0's word of the result, their peer timeout stretched by the share.
double time_pair_engine(const ProfileRequest& r, const predict::SchemeProfile& p, double budget_s) {
  auto& all = *r.transport;
  if (r.workers < 3) return 0.0;
  // Ranks 0 and 1, with the cores the idle ranks leave them (SchemeProfile::anchors).
  const predict::Target two{2, p.link, std::min(2, p.ranks_on_host), true, p.shape()};
  const int64_t n = engine_clocks(r, predict::predict(p, predict::Scheme::sfb_full(), two).clock_s, budget_s);
  if (n == 0) return 0.0;
  int64_t pair_ns = 0;
  const double timeout_s = all.peer_timeout_s();
  if (all.rank() < 2) {
    comm::PrefixTransport pair(all, 2);
    ProfileRequest q = r;
    q.transport = &pair;
    q.workers = 2;
    pair_ns = static_cast<int64_t>(time_engine(q, pair, Scheme::kSfb, nullptr, n, budget_s).clock_s * 1e9);
  } else {
    all.set_peer_timeout(timeout_s + budget_s);
  }
  const Bytes word = comm::broadcast_bytes(all, 0, std::as_bytes(std::span(&pair_ns, 1)));
  all.set_peer_timeout(timeout_s);
  SFB_CHECK(word.size() == sizeof pair_ns, "profile: rank 0's word of the pair's engine has {} bytes", word.size());
  std::memcpy(&pair_ns, word.data(), sizeof pair_ns);
  return static_cast<double>(pair_ns) * 1e-9;
}

// The SFB engine's pieces (the network as what the clock leaves of compute and apply), then the SFB
// engine with evaluations, the SFB engine on two ranks, and the all-reduce baseline's clock without
// and with evaluations, each for as many clocks as fit in its share of the time budget (from the
// pieces' prediction: SFB a quarter, with evaluations up to half, on two ranks an eighth up to five
// eighths, the all-reduce half the rest or all of it when half does not fit 4 clocks, with
// evaluations the remainder); an engine whose 4 clocks would not fit is left out (its anchors stay
// 1) and said so.
void time_engines(const ProfileRequest& r, predict::SchemeProfile& p, double budget_s) {
  const Stopwatch took;
  const predict::Target here{r.workers, p.link, p.ranks_on_host, true, p.shape()};  // as measured
  const double sfb_s = predict::predict(p, predict::Scheme::sfb_full(), here).clock_s;
  if (const int64_t n = engine_clocks(r, sfb_s, budget_s / 4)) {
    const EngineClocks sfb = time_engine(r, *r.transport, Scheme::kSfb, nullptr, n, budget_s / 4);
    p.engine_clock_s = sfb.clock_s;
    p.engine_clock_se_s = sfb.clock_se_s;
    p.engine_sf_s = sfb.compute_s;
    p.engine_apply_s = sfb.apply_s;
    p.engine_comm_s = std::max(0.0, sfb.clock_s - sfb.compute_s - sfb.apply_s);
    p.bcast_cpu_ns_per_byte = sfb.comm_cpu_ns_per_byte;
    const EngineClocks evals = time_engine_with_evals(r, p, *r.transport, Scheme::kSfb, nullptr, p.engine_clock_s,
                                                      left_s(r, budget_s / 2, took));
    p.engine_eval_clock_s = evals.clock_s;
    p.engine_eval_clock_se_s = evals.clock_se_s;
    if (p.engine_clock_s > 0)
      p.engine_pair_clock_s = time_pair_engine(r, p, std::min(budget_s / 8, left_s(r, budget_s * 5 / 8, took)));
  } else if (r.transport->rank() == 0) {
    spdlog::warn(
        "profile: the SFB engine's 4 clocks would take about {:.0f} s: not run (the prediction adds no engine cost of "
        "its own)",
        4 * sfb_s);
  }
  const Config& cfg = *r.cfg;
  Config ar = cfg;
  ar.comm.scheme = sfb::Scheme::kAllreduce;
  const double ar_s = predict::predict(p, predict::Scheme::allreduce(), here).clock_s;
  if (const EngineRun n = engine_clocks_before_evals(r, ar_s, left_s(r, budget_s, took)); n.clocks > 0) {
    auto ex = baselines::make_exchange(ar, r.model->has_prox(), r.allreduce);
    const EngineClocks e = time_engine(r, *r.transport, Scheme::kAllreduce, ex.get(), n.clocks, n.max_s);
    p.engine_allreduce_clock_s = e.clock_s;
    p.engine_allreduce_clock_se_s = e.clock_se_s;
    auto again = baselines::make_exchange(ar, r.model->has_prox(), r.allreduce);
    const EngineClocks evals = time_engine_with_evals(r, p, *r.transport, Scheme::kAllreduce, again.get(),
                                                      p.engine_allreduce_clock_s, left_s(r, budget_s, took));
    p.engine_allreduce_eval_clock_s = evals.clock_s;
    p.engine_allreduce_eval_clock_se_s = evals.clock_se_s;
  } else if (r.transport->rank() == 0) {
    spdlog::warn(
        "profile: the all-reduce engine's 4 clocks would take about {:.0f} s: not run (its anchor stays 1: its pieces "
        "alone)",
        4 * ar_s);
  }
}

// Every rank sends `bytes` to every other at once and receives theirs (on kTagSf: nothing else
// runs yet), as the SFB communication thread does with one clock's batch.
void broadcast_round(comm::Transport& t, const std::shared_ptr<const Bytes>& buf) {
  for (int q = 1; q < t.size(); ++q) t.send_shared((t.rank() + q) % t.size(), comm::kTagSf, buf);
  for (int q = 1; q < t.size(); ++q) t.recv(comm::kTagSf);
}

// a + b M from (bytes, seconds) points; when noise gives no positive slope (small messages on an
// idle link), the largest point's time per byte with a = 0.
LineFit robust_fit(const std::vector<std::pair<double, double>>& xs) {
  LineFit f = fit_us(xs);
  if (std::isfinite(f.b) && f.b > 0 && std::isfinite(f.a)) return f;
  const auto& [bytes, sec] = xs.back();
  return {0.0, sec * 1e6 / bytes, 0.0, static_cast<int>(xs.size())};
}

// Every rank but 0 sends `buf` to rank 0 at once, which answers each with an empty message once
// all are in: what a parameter server's link sees when every worker pushes to it.
void incast_round(comm::Transport& t, const std::shared_ptr<const Bytes>& buf) {
  if (t.rank() == 0) {
    for (int q = 1; q < t.size(); ++q) t.recv(comm::kTagSf);
    for (int q = 1; q < t.size(); ++q) t.send(q, comm::kTagSf, {});
  } else {
    t.send_shared(0, comm::kTagSf, buf);
    t.recv(comm::kTagSf);
  }
}

// Timed rounds at each of `sizes` in `share_s`: a warm-up round (connections, TCP windows), whose
// slowest rank's time says what one costs, then up to `repeats` of them, as many as fit in what
// is left of the share split over the sizes still to go (at least 1): the slowest rank's median
// per size. `run(i)` runs one round at sizes[i]; every rank makes the same choices (the times are
// the slowest rank's).
template <typename Run>
std::vector<double> timed_rounds(comm::Transport& t, int repeats, size_t sizes, double share_s, Run&& run) {
  std::vector<double> med;
  double spent = 0;
  for (size_t i = 0; i < sizes; ++i) {
    const double warm = slowest_median(t, PieceClock{}, 1, [&] { run(i); });
    spent += warm;
    const int n = repeats_within(repeats, warm, (share_s - spent) / static_cast<double>(sizes - i));
    med.push_back(slowest_median(t, PieceClock{}, n, [&] { run(i); }));
    spent += n * med.back();
  }
  return med;
}

// a + b M from the slowest rank's median of `round` at 16 KiB, top / 4 and top bytes within
// `share_s` (timed_rounds), M the bytes one host's link carries (`per_host` messages of each size).
template <typename Round>
LineFit fit_rounds(const ProfileRequest& r, int64_t top, int per_host, double share_s, Round&& round) {
  const std::array<int64_t, 3> sizes{int64_t{16} << 10, top / 4, top};
  std::vector<std::shared_ptr<const Bytes>> bufs;
  for (int64_t m : sizes) bufs.push_back(std::make_shared<const Bytes>(static_cast<size_t>(m), std::byte{1}));
  const auto med =
      timed_rounds(*r.transport, r.repeats, sizes.size(), share_s, [&](size_t i) { round(*r.transport, bufs[i]); });
  std::vector<std::pair<double, double>> xs;
  for (size_t i = 0; i < sizes.size(); ++i) xs.emplace_back(static_cast<double>(sizes[i]) * per_host, med[i]);
  return robust_fit(xs);
}

constexpr int64_t kAllreduceSmallBytes = 4 << 10;
constexpr int64_t kAllreduceSmallCalls = 32;

// The broadcast's, the incast's and the all-reduce's fits, a third of `share_s` each.
void measure_links(const ProfileRequest& r, predict::SchemeProfile& p, double share_s) {
  auto& t = *r.transport;
  const int P = r.workers;
  if (P < 2) return;
  // A small message for the start-up a, and the batch's size for b (at least 1 MiB: measurable).
  const int64_t top = std::clamp<int64_t>(p.batch_bytes, 1 << 20, 16 << 20);
  const auto f = fit_rounds(r, top, P - 1, share_s / 3, broadcast_round);
  p.link = {"fitted", std::max(0.0, f.a), f.b};
  p.bcast_r2 = f.r2;
  // The incast: P - 1 workers' pushes into one host's link, at the dense update's size.
  const auto in =
      fit_rounds(r, std::clamp<int64_t>(4 * p.J * p.D, 1 << 20, 16 << 20), P - 1, share_s / 3, incast_round);
  p.incast_a_us = std::max(0.0, in.a);
  p.incast_b_us_per_byte = in.b;
  comm::TransportChannel ch(t, comm::kTagReduce);
  comm::RankOrderAllreduce ar(ch, P);  // the engines' default cost picks its algorithm, as theirs
  // At the dense engine's block (W / block calls back to back, as the engine makes them, timed
  // together: one call of a millisecond or two on a fraction of a core moves by up to a CFS period
  // with the phase it starts at) and at 4 KiB or more (kAllreduceSmallCalls in a row: a call's
  // start-up, A, the part that grows with N), the smallest size that takes the block's algorithm
  // (at 3 ranks the default cost sends 4 KiB direct, one step, and the block in segments). W is
  // timed up to 32 MiB, and a block above a quarter of it (W of 1-4 MiB, or over 256 MiB: 8 MiB)
  // at a quarter (4 calls). The earlier fit's second size, one call of W, ran slower than W's
  // blocks in a row (0.27 s against 0.23 for 16 MiB on 4 hosts of 0.125 cores) and left A below 0,
  // where sfb-commbench measures a call's start-up at 4.4-4.6 ms.
  const int64_t w_bytes = std::clamp<int64_t>(4 * p.J * p.D, 1 << 20, 32 << 20);
  p.allreduce_block_bytes = dense_allreduce_block_bytes(4 * p.J * p.D);
  const int64_t block = p.allreduce_block_bytes * 4 <= w_bytes ? p.allreduce_block_bytes : w_bytes / 4;
  int64_t small = kAllreduceSmallBytes;
  while (small < block / 4 && allreduce_direct(small, P, LinkCost{}) != allreduce_direct(block, P, LinkCost{}))
    small *= 2;
  const std::array<int64_t, 2> sizes{small, block};
  const std::array<int64_t, 2> calls{kAllreduceSmallCalls, std::max<int64_t>(1, w_bytes / block)};
  std::vector<float> data;
  int64_t id = 0;
  const auto med = timed_rounds(t, r.repeats, sizes.size(), share_s / 3, [&](size_t i) {
    data.resize(static_cast<size_t>(sizes[i] / 4), 1.0f);
    for (int64_t k = 0; k < calls[i]; ++k) ar.run(data, id++);
  });
  std::vector<std::pair<double, double>> ars;
  for (size_t i = 0; i < sizes.size(); ++i)
    ars.emplace_back(static_cast<double>(sizes[i]), med[i] / static_cast<double>(calls[i]));
  const auto g = robust_fit(ars);
  p.allreduce_a_us = g.a;
  p.allreduce_b_us_per_byte = g.b;
  p.allreduce_r2 = g.r2;
}

// This process's machine, as two keys (0: unknown): its kernel (the boot id) with its CPU budget
// (the cgroup `cpu_group`, "" none), which ranks share even when MPI sees them on different hosts
// (network namespaces with their own hostnames: the netns cluster, whose --cpus gives each host a
// budget of its own), and its hostname, which MPI's notion of a host follows.
struct MachineKeys {
  int64_t budget = 0, host = 0;
};
MachineKeys machine_keys(const std::string& cpu_group) {
  std::string id;  // procfs files report size 0: read as a stream
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, id);
  std::array<char, 256> name{};
  const bool named = gethostname(name.data(), name.size() - 1) == 0 && name[0] != '\0';
  return {static_cast<int64_t>(id.empty() ? 0 : fnv1a64(id + "\n" + cpu_group) >> 1),
          static_cast<int64_t>(named ? fnv1a64(std::string(name.data())) >> 1 : 0)};
}

// The ranks of `t` that share this rank's machine: its budget, or its hostname where more ranks
// share that (ranks of one host in budgets of their own still share its memory). Counted among t's
// ranks only: in a profile with FMS's servers, the workers (a server on a worker's host waits while
// they measure, and its MPI count of ranks on the host would count it: the profile then said 2 ranks
// a host on netns hosts of their own). `fallback` (MPI's ranks on this host) when neither key is
// known.
int ranks_on_machine(comm::Transport& t, int fallback, const std::string& cpu_group) {
  const MachineKeys mine = machine_keys(cpu_group);
  const auto budgets = comm::allgather_i64(t, mine.budget);
  const auto hosts = comm::allgather_i64(t, mine.host);
  int same_budget = 0, same_host = 0;
  for (size_t i = 0; i < budgets.size(); ++i) {
    same_budget += mine.budget != 0 && budgets[i] == mine.budget;
    same_host += mine.host != 0 && hosts[i] == mine.host;
  }
  return mine.budget == 0 && mine.host == 0 ? fallback : std::max(same_budget, same_host);
}

// Of the FMS servers (the ranks from `workers` on), those on a worker's host: its hostname (a netns
// host's own, or a node's), which is what shares a network link; its machine's budget where no
// hostname is known. mpirun --map-by node on P hosts puts server s beside worker s. Every rank of
// `all` takes part.
int servers_beside_workers(comm::Transport& all, int workers, const std::string& cpu_group) {
  const MachineKeys mine = machine_keys(cpu_group);
  const auto budgets = comm::allgather_i64(all, mine.budget);
  const auto hosts = comm::allgather_i64(all, mine.host);
  const auto shares = [&](size_t a, size_t b) {
    return hosts[a] != 0 ? hosts[a] == hosts[b] : budgets[a] != 0 && budgets[a] == budgets[b];
  };
  int beside = 0;
  for (size_t s = static_cast<size_t>(workers); s < budgets.size(); ++s) {
    bool any = false;
    for (size_t w = 0; w < static_cast<size_t>(workers); ++w) any = any || shares(s, w);
    beside += any;
  }
  return beside;
}

// A rank's memory bandwidth with every rank at once: a += b over two 32 MiB float arrays (beyond
// a core's share of any cache), with the rank's OpenMP threads, 12 bytes of traffic per float;
// each timing kBandwidthPasses adds long, over many of the scheduler's slices where ranks share
// cores (one add of tens of milliseconds ran alone or descheduled by chance: three profiles of one
// job minutes apart measured 6.8 to 15 GB/s, the median of 15 adds 6.9 to 16.8).
constexpr int kBandwidthPasses = 8;
double memory_bandwidth(const ProfileRequest& r, int threads, const PieceClock& clock) {
  const size_t n = size_t{8} << 20;
  std::vector<float> a(n, 1.0f), b(n, 1e-7f);
  const auto add = [&] {
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (size_t i = 0; i < n; ++i) a[i] += b[i];
  };
  add();  // first touch
  const auto passes = [&] {
    for (int k = 0; k < kBandwidthPasses; ++k) add();
  };
  const double s = slowest_median(*r.transport, clock, r.repeats, passes);
  return s > 0 ? 12.0 * static_cast<double>(n) * kBandwidthPasses / s : 0.0;
}

// The applier on 1 and m copies of the batch (8 where they take under 256 MiB: the per-batch slope
// is a difference of two timings, and 4 copies at 4 hosts left it 0.006 to 0.013 s between
// profiles of the 2048 job), forming the dense update and adding it, on the
// profile's own W (its values no longer matter: the SF computation was timed before). The dense
// update is formed and added by row blocks of at most 16 MiB, as the baselines do, and scaled to
// W's rows: no second W is held.
void time_updates(const ProfileRequest& r, Matrix& stored, const SfBatch& batch, predict::SchemeProfile& p) {
  const Layout layout = r.model->layout();
  UpdateApplier applier(p.threads, layout);
  const int m = p.batch_bytes * 8 <= (int64_t{256} << 20) ? 8 : std::clamp(r.workers, 2, 8);
  // m distinct copies, as m senders' batches are (one buffer read m times would stay in cache).
  std::vector<SfBatch> copies(static_cast<size_t>(m), batch);
  std::vector<const SfBatch*> many;
  for (const auto& c : copies) many.push_back(&c);
  auto& t = *r.transport;
  const PieceClock clock = piece_clock(p);
  const double one = slowest_median(
      t, clock, r.repeats, [&] { applier.apply(stored, batch); }, kPieceMoreS);
  const double lots = slowest_median(
      t, clock, r.repeats, [&] { applier.apply(stored, many); }, kPieceMoreS);
  p.apply_batch_s = std::max(0.0, (lots - one) / (m - 1));
  p.apply_fixed_s = one - p.apply_batch_s;
  const int64_t rows = std::clamp<int64_t>((int64_t{16} << 20) / (4 * std::max<int64_t>(1, stored.cols())), 1,
                                           std::max<int64_t>(1, stored.rows()));
  const double scale = static_cast<double>(stored.rows()) / static_cast<double>(rows);
  Matrix block;
  p.form_dense_s = scale * slowest_median(
                               t, clock, r.repeats,
                               [&] { baselines::dense_update_rows(batch, layout, 0, rows, block); }, kPieceMoreS);
  p.add_dense_s = scale * slowest_median(
                              t, clock, r.repeats, [&] { stored.topRows(rows) += block; }, kPieceMoreS);
}

// The median of `repeats` runs of f after a first one, or that one when it took over a second.
template <typename F>
double median_after_first(const PieceClock& clock, int repeats, F&& f) {
  const double one = clock.seconds(f);
  if (one > 1.0) return one;
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) times.push_back(clock.seconds(f));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// What an evaluation costs the ranks: every rank's replica-drift sketch (the update thread's,
// runtime/replica_drift.h), the slowest rank's; rank 0's monitor's evaluation (runtime/
// objective_monitor.cc evaluate()) and its snapshot's copy of W, timed on rank 0 alone (the others
// wait). Every rank gets the same times.
void time_eval(const ProfileRequest& r, const Matrix& stored, predict::SchemeProfile& p) {
  const auto& cfg = *r.cfg;
  p.eval_every = cfg.eval.every > 0 ? cfg.eval.every : 0;
  p.eval_snapshot = cfg.eval.snapshot;
  auto& t = *r.transport;
  const PieceClock clock = piece_clock(p);
  double eval = 0, copy = 0, sketch = 0;
  if (p.eval_every > 0) {
    runtime::DriftSketcher sketcher(stored.rows(), stored.cols(), cfg.job.seed);
    volatile double sink = 0;
    sketch = median_after_first(clock, r.repeats, [&] { sink = sink + sketcher.sketch(stored, 1.0f)[0]; });
  }
  if (t.rank() == 0 && p.eval_every > 0) {
    const auto& model = *r.model;
    const io::Dataset& rows = r.objective_rows && r.objective_rows->n > 0 ? *r.objective_rows : *r.train;
    const io::Dataset* test = r.test && r.test->n > 0 ? r.test : nullptr;
    const api::Weights W{stored, 1.0f, model.layout()};
    volatile double sink = 0;
    const auto once = [&] {
      sink = sink + model.objective(W, rows, cfg.eval.train_sample);
      if (test) sink = sink + model.accuracy(W, *test);
      sink = sink + static_cast<double>(model.metrics(W, rows, cfg.eval.train_sample, test).size());
    };
    eval = median_after_first(clock, r.repeats, once);
    // The monitor reuses its snapshot's memory: its pages are touched before the copy is timed.
    Matrix snap = Matrix::Zero(stored.rows(), stored.cols());
    copy = median_after_first(clock, r.repeats, [&] { snap = stored; });
  }
  p.eval_s = largest(t, eval, 1e-9);
  p.eval_copy_s = largest(t, copy, 1e-9);
  p.eval_sketch_s = largest(t, sketch, 1e-9);
}

// `r` at minibatch K: its config copied into `cfg` (which must outlive the request) with K set.
ProfileRequest at_minibatch(const ProfileRequest& r, Config& cfg, int64_t K) {
  cfg = *r.cfg;
  cfg.optimizer.minibatch = K;
  ProfileRequest q = r;
  q.cfg = &cfg;
  return q;
}

// The minibatch to measure at (profiled_minibatch): one SF computation of min(K, 16) samples on
// `stored`, the slowest rank's, says what a sample costs; a warning when K is cut.
int64_t minibatch_within(const ProfileRequest& r, const Matrix& stored, const predict::SchemeProfile& described) {
  const int64_t K = r.cfg->optimizer.minibatch, probe_K = std::min<int64_t>(K, 16);
  if (K <= probe_K) return K;
  Config at;
  ProfileRequest probe = at_minibatch(r, at, probe_K);
  probe.repeats = 1;
  predict::SchemeProfile scratch = described;  // its cores: the clock the probe is timed by
  time_sf(probe, stored, scratch);
  const int64_t k = profiled_minibatch(K, probe_K, scratch.sf_s, r.budget_s);
  if (k < K && r.transport->rank() == 0)
    spdlog::warn(
        "profile: one SF computation of the job's K = {} samples would take about {:.2g} s, too long to profile in "
        "{:.0f} s: measured at K = {} (predictions rescale it to K = {}: predict/profile.h)",
        K, scratch.sf_s * static_cast<double>(K) / static_cast<double>(probe_K), r.budget_s, k, K);
  return k;
}

// Of p.sf_s, what does not grow with K (a dense model's pass over W): the SF computation of K/2
// samples timed too (sf_fixed_seconds). Sparse v (no pass over W: what such a model's computation
// does not owe to K is not W's size) or K = 1: 0.
double sf_fixed_part(const ProfileRequest& r, const Matrix& stored, const predict::SchemeProfile& p) {
  if (p.sparse_v || p.K < 2) return 0.0;
  Config at;
  const ProfileRequest half = at_minibatch(r, at, p.K / 2);
  predict::SchemeProfile scratch = p;
  time_sf(half, stored, scratch);
  return sf_fixed_seconds(p.sf_s, scratch.sf_s, p.K);
}

// The workers' engine runs that time_engines meant to take and did not (SchemeProfile::skipped):
// the SFB engine, its two-rank run (with 3 workers or more, once the SFB engine ran) and the
// all-reduce engine.
std::vector<std::string> skipped_engines(const predict::SchemeProfile& p) {
  std::vector<std::string> out;
  if (!(p.engine_clock_s > 0)) out.emplace_back("the SFB engine");
  if (p.workers >= 3 && p.engine_clock_s > 0 && !(p.engine_pair_clock_s > 0))
    out.emplace_back("the two-rank SFB engine");
  if (!(p.engine_allreduce_clock_s > 0)) out.emplace_back("the all-reduce engine");
  return out;
}

// What a profile says of the job before anything is timed.
predict::SchemeProfile describe(const ProfileRequest& r) {
  const auto& cfg = *r.cfg;
  const auto& model = *r.model;
  predict::SchemeProfile p;
  p.config = cfg.source;
  p.model = model.name();
  p.workers = r.workers;
  p.ranks_on_host = ranks_on_machine(*r.transport, r.ranks_on_host, r.cpu_group);
  p.cores = std::max(0.001, r.cores);
  p.machine_cores = std::max(1u, std::thread::hardware_concurrency());
  p.threads = static_cast<int>(std::max<int64_t>(1, cfg.runtime.threads));
  p.J = model.rows();
  p.D = model.cols();
  p.K = cfg.optimizer.minibatch;
  p.sparse_v = model.sparse_v();
  p.layout = model.layout();
  p.has_prox = model.has_prox();
  // The reconciliation partial broadcast would run.
  const std::optional<Reconcile> rec = runtime::partial_broadcast_reconcile(cfg);
  p.reconcile = rec ? std::string(name(*rec)) : std::string();
  p.reconcile_every = cfg.sfb.reconcile_every;
  return p;
}

// Every piece and the SFB and all-reduce engines, on r.transport's ranks (all of them workers), at
// the minibatch that lets them finish in r.budget_s (minibatch_within; p.job_K says when it was
// cut); the links in half of what the pieces left, the engines in the rest.
predict::SchemeProfile measure_workers(const ProfileRequest& job) {
  const Stopwatch took;
  predict::SchemeProfile p = describe(job);
  Config at;  // the job's config at the minibatch measured (set below)
  const ProfileRequest r = at_minibatch(job, at, job.cfg->optimizer.minibatch);
  auto& model = *r.model;
  auto phase = [&, last = 0.0](const char* name) mutable {
    const double now = largest(*r.transport, took.seconds(), 1e-3);
    if (r.transport->rank() == 0) spdlog::debug("profile: {} took {:.1f} s", name, now - last);
    last = now;
    return now;
  };
  {  // The pieces, on one W of the profile's own (freed before the engines hold theirs).
    const Layout layout = model.layout();
    Matrix stored = Matrix::Zero(stored_rows(layout, p.J, p.D), stored_cols(layout, p.J, p.D));
    Rng rng = make_rng(at.job.seed, static_cast<uint64_t>(r.transport->rank()));
    model.init(MatrixMap(stored.data(), stored.rows(), stored.cols()), rng);
    at.optimizer.minibatch = minibatch_within(job, stored, p);
    p.K = at.optimizer.minibatch;
    p.job_K = p.K < job.cfg->optimizer.minibatch ? job.cfg->optimizer.minibatch : 0;
    const SfBatchPtr batch = time_sf(r, stored, p);
    p.sf_fixed_s = sf_fixed_part(r, stored, p);
    // Sparse rows differ between partitions: every rank takes the largest batch.
    p.batch_bytes =
        static_cast<int64_t>(largest(*r.transport, static_cast<double>(comm::encode_sf_batch(*batch).size()), 1.0));
    p.v_nonzeros = largest(*r.transport, static_cast<double>(batch->nnz_v()) / std::max(1, batch->count), 1e-3);
    time_updates(r, stored, *batch, p);
    time_eval(r, stored, p);
  }
  p.mem_bytes_per_s = memory_bandwidth(r, p.threads, piece_clock(p));
  measure_links(r, p, std::max(0.0, r.budget_s - phase("the pieces")) / 2);
  if (r.workers > 1) time_engines(r, p, std::max(0.0, r.budget_s - phase("the links")));
  p.profile_s = phase("the engines");
  if (r.workers > 1) p.skipped = skipped_engines(p);
  return p;
}

// The end of an FMS engine's run on worker 0 (right after its engine returns, before the workers
// gather anything: a server's word on their own transport would be an error there): waits until
// every server has said its run is over (every worker's BYE is in, so nothing of the run is still
// in flight to it).
void await_servers(comm::Transport& all, int workers) {
  if (all.rank() != 0) return;
  for (int s = workers; s < all.size(); ++s) {
    const comm::Message m = all.recv(comm::kTagControl);
    if (m.src < workers || !m.data.empty())
      throw CommError(
          fmt::format("worker rank 0: unexpected control message from rank {} while waiting for the FMS "
                      "servers (ranks {} - {})",
                      m.src, workers, all.size() - 1));
  }
}

// Then worker 0 tells each server whether another run follows (one byte on kTagControl: 1
// another, 0 none).
void tell_servers(comm::Transport& all, int workers, bool another) {
  if (all.rank() != 0) return;
  const std::array<std::byte, 1> msg{std::byte{another ? uint8_t{1} : uint8_t{0}}};
  for (int s = workers; s < all.size(); ++s) all.send(s, comm::kTagControl, msg);
}

// A server's end of a run: says so to worker 0 and waits for its word, true when another run
// follows. It takes control messages only: a worker that starts the next run before the word is in
// here (the workers learn the decision among themselves) has its INIT and pushes kept for the next
// FmsServer, which reads them first (Transport::try_recv). No word within the peer timeout is a
// CommError (recv).
bool another_run_follows(comm::Transport& t) {
  t.send(0, comm::kTagControl, {});
  const comm::Message m = t.recv(comm::kTagControl);
  if (m.src != 0 || m.data.size() != 1)
    throw CommError(
        fmt::format("server rank {}: unexpected control message ({} bytes) from rank {} after the FMS "
                    "engine's run",
                    t.rank(), m.data.size(), m.src));
  return m.data[0] == std::byte{1};
}

// The FMS engine with its servers working (the job's server ranks run FmsServer meanwhile) for as
// many clocks as fit in half of `budget_s`, then again with rank 0's monitor evaluating every
// eval.every clocks in what is left (eval_run_clocks), on `all` ranks: the slowest worker's steady
// clocks, gathered among the workers (`w.transport`). When 4 clocks would not fit it is not run
// (the servers are released, and a warning says so).
void time_fms_engine(const ProfileRequest& w, comm::Transport& all, predict::SchemeProfile& p, double budget_s) {
  const Stopwatch took;
  const int S = all.size() - w.workers;
  const predict::Target here{w.workers, p.link, p.ranks_on_host, true, p.shape()};  // as measured
  const double fms_s = predict::predict(p, predict::Scheme::fms(S), here).clock_s;
  const EngineRun n = engine_clocks_before_evals(w, fms_s, budget_s);
  if (n.clocks == 0) {
    if (all.rank() == 0)
      spdlog::warn(
          "profile: the FMS engine's 4 clocks would take about {:.0f} s: not run (FMS is predicted from "
          "its model alone)",
          4 * fms_s);
    baselines::send_bye_to_servers(all, w.workers);  // the servers wait for the engine
    await_servers(all, w.workers);
    tell_servers(all, w.workers, false);
    return;
  }
  Config at;  // the launch's FMS, at the minibatch the workers measured
  const ProfileRequest r = at_minibatch(w, at, p.K);
  auto ex = baselines::make_exchange(at, w.model->has_prox(), w.allreduce);
  const auto servers_done = [&] { await_servers(all, w.workers); };
  const EngineClocks e = time_engine(r, all, Scheme::kFms, ex.get(), n.clocks, n.max_s, 0, servers_done);
  p.engine_fms_clock_s = e.clock_s;
  p.engine_fms_clock_se_s = e.clock_se_s;
  p.engine_fms_servers = p.engine_fms_clock_s > 0 ? S : 0;  // 0 and 0: not measured
  auto again = baselines::make_exchange(at, w.model->has_prox(), w.allreduce);
  bool ran = false;
  const EngineClocks evals = time_engine_with_evals(
      r, p, all, Scheme::kFms, again.get(), p.engine_fms_clock_s, left_s(r, budget_s, took),
      [&](bool runs) { tell_servers(all, w.workers, ran = runs); }, servers_done);
  p.engine_fms_eval_clock_s = evals.clock_s;
  p.engine_fms_eval_clock_se_s = evals.clock_se_s;
  if (ran) tell_servers(all, w.workers, false);
}

// A server rank's part: serving W's shard to the FMS engine's runs, each until the workers' BYE, a
// fresh shard for each. The first run's INIT comes once the workers have measured among themselves
// (up to the time budget, and what it does not bound: one evaluation, the applies' pass over W), so
// its first message may take the budget and the peer timeout; the peer timeout bounds every later
// wait.
void serve(const ProfileRequest& r) {
  auto& model = *r.model;
  const Layout l = model.layout();
  double first_message_s = r.budget_s + r.cfg->runtime.peer_timeout_s;
  do {
    baselines::FmsServer server(r.cfg->fms, r.cfg->runtime.peer_timeout_s, *r.transport,
                                stored_rows(l, model.rows(), model.cols()), stored_cols(l, model.rows(), model.cols()),
                                runtime::model_prox(*r.cfg, model));
    server.run(first_message_s);
    first_message_s = 0;  // the next runs start as the workers' word comes
  } while (another_run_follows(*r.transport));
}

}  // namespace

predict::SchemeProfile measure_scheme_profile(const ProfileRequest& r) {
  SFB_CHECK(r.cfg && r.transport && r.model && r.train, "measure_scheme_profile: incomplete request");
  auto& all = *r.transport;
  if (all.size() == r.workers) return measure_workers(r);
  SFB_CHECK(r.workers >= 1 && r.cfg->comm.scheme == Scheme::kFms && all.size() == r.workers + r.cfg->fms.servers,
            "measure_scheme_profile: {} workers of {} ranks need comm.scheme = \"fms\" with fms.servers = {} (got "
            "\"{}\", {})",
            r.workers, all.size(), all.size() - r.workers, r.cfg->comm.scheme, r.cfg->fms.servers);
  // Where the servers run, before the workers and the servers part.
  const int beside = servers_beside_workers(all, r.workers, r.cpu_group);
  if (all.rank() >= r.workers) {
    serve(r);
    return {};
  }
  // The workers measure among themselves (the servers wait in serve()), then the FMS engine with
  // the servers, in the third of the time budget kept for it.
  const Stopwatch took;
  comm::PrefixTransport workers(all, r.workers);
  ProfileRequest w = r;
  w.transport = &workers;
  w.budget_s = r.budget_s * 2 / 3;
  predict::SchemeProfile p;
  try {
    p = measure_workers(w);
    time_fms_engine(w, all, p, std::max(0.0, r.budget_s - largest(workers, took.seconds(), 1e-3)));
  } catch (...) {
    // A worker that cannot get to the FMS engine's end releases the servers: its BYE counts towards
    // the end of a run (once every worker's is in; a second is ignored), and worker 0's word of none
    // ends the wait after one (a server still in a run that takes the word first fails on it, as
    // "unexpected message", instead of waiting out the peer timeout).
    try {
      baselines::send_bye_to_servers(all, r.workers);
      tell_servers(all, r.workers, false);
    } catch (const Error&) {
      // A transport that failed may fail these too: the first error is the one to report.
    }
    throw;
  }
  p.engine_fms_servers_beside = p.engine_fms_servers > 0 ? beside : 0;
  if (!(p.engine_fms_clock_s > 0)) p.skipped.emplace_back("the FMS engine");
  p.profile_s = largest(workers, took.seconds(), 1e-3);
  return p;
}

}  // namespace sfb::profiler
