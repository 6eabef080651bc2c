#include "report.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <cstdio>

#include <fmt/format.h>

#include "sfb/baselines/scheme_bytes.h"
#include "sfb/core/memory.h"
#include "sfb/runtime/worker.h"
#include "sfb_revision.h"

namespace sfbd {
namespace {

using sfb::fixed;
using sfb::Json;
using sfb::sig;

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

std::string scheme_name(const sfb::Config& cfg) {
  return cfg.comm.scheme == sfb::Scheme::kSfb ? fmt::format("sfb/{}", cfg.sfb.broadcast)
                                              : std::string(sfb::name(cfg.comm.scheme));
}

double mean_of(const sfb::runtime::WorkerResult& r, double sfb::runtime::RankStats::*m) {
  double s = 0;
  for (const auto& x : r.all) s += x.*m;
  return r.all.empty() ? 0.0 : s / static_cast<double>(r.all.size());
}

// Network bytes of the whole job: what the workers sent plus what the parameter servers sent them.
int64_t network_bytes(const sfb::runtime::WorkerResult& r) {
  int64_t b = 0;
  for (const auto& s : r.all) b += s.bytes_sent + s.bytes_from_servers;
  return b;
}

// The job's network bytes per clock of this run (0 before the first clock).
double bytes_per_clock(const sfb::runtime::WorkerResult& r) {
  const int64_t clocks = r.final_clock - r.start_clock;
  return clocks > 0 ? static_cast<double>(network_bytes(r)) / static_cast<double>(clocks) : 0.0;
}

// Whether network_bytes holds the job's bytes: not when the dense baseline's all-reduce is Open MPI's.
bool bytes_counted(const sfb::Config& cfg) {
  return !(cfg.comm.scheme == sfb::Scheme::kAllreduce && cfg.comm.collectives == sfb::Collectives::kMpi);
}

double samples_per_s(const SfbRun& run) {
  const auto& r = run.result;
  // This run's clocks over this run's seconds (a resumed run counts from its checkpoint's clock).
  return r.seconds > 0 ? static_cast<double>(r.final_clock - r.start_clock) * run.workers *
                             run.cfg.optimizer.minibatch / r.seconds
                       : 0.0;
}

Json rank_json(const sfb::runtime::RankStats& s) {
  return {{"rank", s.rank},
          {"clocks", s.clocks},
          {"pairs_sent", s.pairs_sent},
          {"pairs_received", s.pairs_received},
          {"pairs_applied", s.pairs_applied},
          {"bytes_sent", s.bytes_sent},
          {"bytes_received", s.bytes_received},
          {"compute_s", fixed(s.compute_s, 6)},
          {"update_s", fixed(s.update_s, 6)},
          {"wait_s", fixed(s.wait_s, 6)},
          {"max_lead", s.max_lead},
          {"checksum", hex(s.checksum)}};
}

// Every key's resolved value, so that the summaries of a sweep differ where the runs did.
// Every key with its typed value (summary.json's "settings").
Json settings_json(const sfb::Config& cfg) { return Json::parse(cfg.settings_json()); }

}  // namespace

// The drift guard: the last and largest replica drift of the evaluations, the warning threshold
// and how many evaluations exceeded it.
Json drift_json(const sfb::Config& cfg, const sfb::runtime::WorkerResult& r) {
  double last = NAN, max = NAN;
  for (const auto& e : r.evals) {
    if (e.replica_drift_clock < 0 || !std::isfinite(e.replica_drift)) continue;
    last = e.replica_drift;
    max = std::isnan(max) ? last : std::max(max, last);
  }
  return {{"last", sig(last, 6)},
          {"max", sig(max, 6)},
          {"warn_above", cfg.eval.drift_warn},
          {"stop_above", cfg.stop.max_replica_drift},
          {"warnings", r.drift_warnings}};
}

Json reconcile_json(const sfb::runtime::WorkerResult& r) {
  if (r.reconcile_mode.empty()) return nullptr;
  return {{"mode", r.reconcile_mode},
          {"every", r.reconcile_every},
          {"count", r.reconciles},
          {"seconds", fixed(r.reconcile_s, 6)},
          {"max_drift_before", sig(r.reconcile_max_drift, 6)},
          {"last_drift_before", sig(r.reconcile_last_drift, 6)}};
}

namespace {
// Per rank: the measured peak RSS (getrusage), the estimate before training and their ratio.
Json memory_json(const SfbRun& run) {
  Json ranks = Json::array();
  const auto& m = run.memory;
  for (size_t q = 0; q < m.peak_rss.size() && q < m.estimate.size() && q < m.before_training.size(); ++q) {
    const auto peak = static_cast<double>(m.peak_rss[q]);
    const auto est = static_cast<double>(m.estimate[q]);
    ranks.push_back({{"rank", q},
                     {"role", static_cast<int>(q) < run.workers ? "worker" : "server"},
                     {"peak_rss_bytes", m.peak_rss[q]},
                     {"estimate_bytes", m.estimate[q]},
                     {"before_training_bytes", m.before_training[q]},
                     {"peak_over_estimate", est > 0 ? Json(fixed(peak / est, 4)) : Json(nullptr)}});
  }
  return {{"w_bytes", 4 * run.J * run.D}, {"ranks", ranks}};
}
}  // namespace

Json stolen_share_json(double share) { return share >= 0 ? Json(fixed(share, 4)) : Json(nullptr); }

Json sfb_summary(const SfbRun& run) {
  const auto& cfg = run.cfg;
  const auto& r = run.result;
  const auto last = r.evals.empty() ? sfb::EvalRecord{} : r.evals.back();
  Json metrics = Json::object(), sums = Json::array(), ranks = Json::array();
  for (const auto& [k, v] : last.extra) metrics[k] = sig(v, 8);
  bool equal = true;
  for (const auto& s : r.all) {
    equal = equal && s.checksum == r.all[0].checksum;
    sums.push_back(hex(s.checksum));
    ranks.push_back(rank_json(s));
  }
  const double measured = bytes_per_clock(r);
  int64_t pairs = 0, nonzeros = 0;
  for (const auto& s : r.all) {
    pairs += s.pairs_sent;
    nonzeros += s.v_nonzeros_sent;
  }
  const double v_nonzeros =
      run.sparse_v ? static_cast<double>(nonzeros) / static_cast<double>(std::max<int64_t>(pairs, 1)) : -1.0;
  const double theory = run.sharded ? run.sharded_theory_bytes
                                    : sfb::baselines::theory_bytes_per_clock(cfg, run.workers, run.J, run.D, v_nonzeros,
                                                                             r.start_clock, r.final_clock);
  // Open MPI's MPI_Allreduce moves the dense baseline's bytes outside sfb's transport counters: the
  // measured bytes are then null (not a misleading 0) and bytes_counted says why.
  const bool counted = bytes_counted(cfg);
  return {{"config", cfg.source},
          {"overrides", cfg.overrides},
          {"settings", settings_json(cfg)},
          {"sfb_version", SFB_VERSION},
          {"git_revision", SFB_GIT_REVISION},
          {"scheme", scheme_name(cfg)},
          {"auto", run.auto_choice},
          {"lr_search", run.lr_search},
          {"transport", cfg.comm.transport},
          {"collectives", cfg.comm.collectives},
          {"staleness", cfg.sfb.asp() ? Json("inf") : Json(cfg.sfb.staleness)},
          {"J", run.J},
          {"D", run.D},
          {"w_layout", std::string(sfb::layout_name(run.layout))},
          {"network_bytes", network_bytes(r)},
          {"bytes_per_clock", counted ? Json(fixed(measured, 1)) : Json(nullptr)},
          {"bytes_counted", counted},
          {"theory_bytes_per_clock", fixed(theory, 1)},
          {"compute_s_mean", fixed(mean_of(r, &sfb::runtime::RankStats::compute_s), 6)},
          {"update_s_mean", fixed(mean_of(r, &sfb::runtime::RankStats::update_s), 6)},
          {"wait_s_mean", fixed(mean_of(r, &sfb::runtime::RankStats::wait_s), 6)},
          {"model", run.model_name},
          {"ranks", run.workers},
          {"threads_per_rank", cfg.runtime.threads},
          {"consistency", cfg.sfb.consistency_name()},
          {"broadcast", cfg.sfb.broadcast},
          // The peers each worker sends a clock's factors to (sfb.halton_q resolved: 0 means P/2 or so).
          {"receivers_per_clock", cfg.comm.scheme == sfb::Scheme::kSfb
                                      ? sfb::Json(sfb::runtime::make_topology(cfg, run.workers).receivers_per_clock())
                                      : sfb::Json(nullptr)},
          {"minibatch", cfg.optimizer.minibatch},
          {"stop_reason", std::string(sfb::to_string(r.stop_reason))},
          {"stop_detail", r.stop_detail.empty() ? Json(nullptr) : Json(r.stop_detail)},
          {"partition", cfg.data.partition},
          {"objective_rows", run.objective_rows},
          {"replica_drift", drift_json(cfg, r)},
          {"convergence_warning", r.convergence_warning.empty() ? Json(nullptr) : Json(r.convergence_warning)},
          {"still_improving", run.still_improving.empty() ? Json(nullptr) : Json(run.still_improving)},
          {"reconcile", reconcile_json(r)},
          {"final_clock", r.final_clock},
          {"seconds", fixed(r.seconds, 6)},
          {"final_objective", sig(last.objective, 8)},
          {"final_accuracy", fixed(last.accuracy, 6)},
          {"final_metrics", metrics},
          {"samples_per_s", fixed(samples_per_s(run), 3)},
          {"cpu_stolen_share", stolen_share_json(run.cpu_stolen_share)},
          // Sharded, each rank's checksum is of its own rows: they differ by design.
          {"checksums_equal", run.sharded ? Json(nullptr) : Json(equal)},
          {"checksums_of", run.sharded ? "each rank's block of W's rows" : "each rank's replica of W"},
          {"rank_checksums", sums},
          {"per_rank", ranks},
          {"memory", memory_json(run)}};
}

void print_sfb_table(const SfbRun& run) {
  const auto& cfg = run.cfg;
  const auto& r = run.result;
  const auto last = r.evals.empty() ? sfb::EvalRecord{} : r.evals.back();
  fmt::print("\nsfb run: {} | {} workers x {} thread(s) | {} | scheme {} over {} | K = {}\n", cfg.source, run.workers,
             cfg.runtime.threads, cfg.sfb.consistency_name(), scheme_name(cfg), cfg.comm.transport,
             cfg.optimizer.minibatch);
  fmt::print("  stop reason      {}{}{}\n", sfb::to_string(r.stop_reason),
             r.stop_detail.empty() ? "" : " (" + r.stop_detail + ")",
             run.still_improving.empty() ? "" : " (still improving: see the warning above)");
  fmt::print("  model            {} (W {} x {}, {})\n", run.model_name, run.J, run.D, sfb::layout_name(run.layout));
  fmt::print("  clocks           {}\n", r.final_clock);
  fmt::print("  wall time        {:.2f} s\n", r.seconds);
  fmt::print("  final objective  {:.5f} (on {} training rows sampled from every partition)\n", last.objective,
             run.objective_rows);
  if (const Json d = drift_json(cfg, r); d["max"].is_number()) {
    const bool warned = r.drift_warnings > 0;
    fmt::print("  replica drift    {:.3g} (max {:.3g}){}\n", d["last"].get<double>(), d["max"].get<double>(),
               warned ? fmt::format("  WARNING: above eval.drift_warn {} in {} evaluation(s): the replicas disagree",
                                    cfg.eval.drift_warn, r.drift_warnings)
                      : std::string());
  }
  if (!r.reconcile_mode.empty())
    fmt::print("  reconciled       {} times ({}, every {} clocks, {:.2f} s); drift before: max {:.3g}, last {:.3g}\n",
               r.reconciles, r.reconcile_mode, r.reconcile_every, r.reconcile_s, r.reconcile_max_drift,
               r.reconcile_last_drift);
  if (last.accuracy >= 0) fmt::print("  test accuracy    {:.2f} %\n", 100.0 * last.accuracy);
  for (const auto& [k, v] : last.extra) fmt::print("  {:<16} {:.5g}\n", k, v);
  fmt::print("  throughput       {:.0f} samples/s\n", samples_per_s(run));
  if (run.cpu_stolen_share >= 0.01)
    fmt::print("  cpu steal        {:.1f} % of the CPU time the machine wanted went to other guests\n",
               100.0 * run.cpu_stolen_share);
  if (!bytes_counted(cfg))
    fmt::print("  network          not counted (Open MPI's MPI_Allreduce moves the all-reduce's bytes)\n");
  else if (r.final_clock > r.start_clock)
    fmt::print("  network          {:.3f} MB per clock (all ranks)\n", bytes_per_clock(r) / 1e6);
  if (const auto& m = run.memory; !m.peak_rss.empty() && !m.estimate.empty()) {
    const auto [lo, hi] = std::minmax_element(m.peak_rss.begin(), m.peak_rss.end());
    const double w = 4.0 * static_cast<double>(run.J) * static_cast<double>(run.D);
    fmt::print("  memory           W {} per rank{}; peak RSS {} - {} per rank (estimated {} on rank 0)\n",
               sfb::human_bytes(run.sharded ? w / run.workers : w),
               run.sharded ? fmt::format(" (1/{} of {})", run.workers, sfb::human_bytes(w)) : std::string(),
               sfb::human_bytes(static_cast<double>(*lo)), sfb::human_bytes(static_cast<double>(*hi)),
               sfb::human_bytes(static_cast<double>(m.estimate[0])));
  }
  fmt::print("\n  {:>4} {:>7} {:>11} {:>11} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n", "rank", "clocks", "pairs sent",
             "pairs recv", "pairs applied", "MB sent", "MB recv", "compute s", "update s", "wait s",
             run.sharded ? "rows' checksum" : "W checksum");
  for (const auto& s : r.all) {
    fmt::print("  {:>4} {:>7} {:>11} {:>11} {:>12} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f}  {:016x}\n", s.rank,
               s.clocks, s.pairs_sent, s.pairs_received, s.pairs_applied, s.bytes_sent / 1e6, s.bytes_received / 1e6,
               s.compute_s, s.update_s, s.wait_s, s.checksum);
  }
  std::fflush(stdout);
}

namespace {
// Means over the iterations after profiling (those with a prediction).
template <typename T>
double planned_mean(const sfb::cnn::ExecutorResult& r, T sfb::cnn::IterationStats::*m) {
  double s = 0;
  int n = 0;
  for (const auto& it : r.iterations)
    if (it.predicted_us > 0) s += static_cast<double>(it.*m), ++n;
  return n > 0 ? s / n : 0.0;
}
// The median iteration time over the same iterations (robust to the evaluation pauses).
double planned_median_iteration_us(const sfb::cnn::ExecutorResult& r) {
  std::vector<double> v;
  for (const auto& it : r.iterations)
    if (it.predicted_us > 0) v.push_back(it.iteration_us);
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}
// What the plan's groups send per rank and iteration by the model (payload bytes).
int64_t predicted_bytes(const sfb::cnn::ExecutorResult& r, int ranks) {
  int64_t b = 0;
  if (r.profile.size() == 0) return 0;  // a fixed plan: nothing was profiled
  for (const auto& g : r.plan) b += sfb::mgwfbp::group_bytes_sent(r.profile, r.cost, g, ranks);
  return b;
}
// Every layer with its label, its spec and its parameters.
Json layer_table(const sfb::cnn::ExecutorResult& r) {
  Json out = Json::array();
  for (const auto& e : r.network.layers) {
    int64_t params = 0;
    for (const auto& [rows, cols] : e.shapes) params += rows * cols;
    out.push_back({{"name", e.label}, {"spec", e.spec}, {"parameters", params}});
  }
  return out;
}
}  // namespace

Json cnn_summary(const sfb::Config& cfg, const sfb::cnn::ExecutorResult& r, int ranks,
                 const std::vector<int64_t>& checksums) {
  using S = sfb::cnn::IterationStats;
  bool equal = true;
  Json sums = Json::array(), preds = Json::array();
  for (auto c : checksums) {
    equal = equal && c == checksums[0];
    sums.push_back(hex(static_cast<uint64_t>(c)));
  }
  for (const auto& p : r.predictions)
    preds.push_back({{"planner", p.planner},
                     {"groups", p.groups},
                     {"iteration_us", fixed(p.iteration_us, 1)},
                     {"non_overlapped_us", fixed(p.non_overlapped_us, 1)}});
  return {{"config", cfg.source},
          {"overrides", cfg.overrides},
          {"settings", settings_json(cfg)},
          {"sfb_version", SFB_VERSION},
          {"git_revision", SFB_GIT_REVISION},
          {"mode", "mgwfbp"},
          {"ranks", ranks},
          {"transport", cfg.comm.transport},
          {"collectives", cfg.comm.collectives},
          {"planner", cfg.mgwfbp.planner},
          {"groups", r.plan.size()},
          {"plan", sfb::mgwfbp::describe(r.plan, r.profile)},
          {"a_us", fixed(r.cost.a_us, 3)},
          {"b_us_per_byte", sig(r.cost.b_us_per_byte, 7)},
          {"ag_a_us", fixed(r.cost.ag_a_us, 3)},
          {"ag_b_us_per_byte", sig(r.cost.ag_b_us_per_byte, 7)},
          {"bytes_sent_per_iteration", fixed(planned_mean(r, &S::bytes_sent), 0)},
          {"predicted_bytes_per_iteration", predicted_bytes(r, ranks)},
          {"iterations", r.iterations.size()},
          {"seconds", fixed(r.seconds, 6)},
          {"final_accuracy", fixed(r.test_accuracy, 6)},
          {"iteration_us", fixed(planned_mean(r, &S::iteration_us), 1)},
          {"iteration_us_median", fixed(planned_median_iteration_us(r), 1)},
          {"kernels",
           std::string(cfg.job.device == sfb::Device::kCpu ? sfb::name(cfg.cnn.kernels) : sfb::name(cfg.job.device))},
          {"predicted_us", fixed(planned_mean(r, &S::predicted_us), 1)},
          {"forward_us", fixed(planned_mean(r, &S::forward_us), 1)},
          {"backward_us", fixed(planned_mean(r, &S::backward_us), 1)},
          {"comm_wait_us", fixed(planned_mean(r, &S::comm_wait_us), 1)},
          {"replans", r.replans},
          {"stop_reason", std::string(sfb::to_string(r.stop_reason))},
          {"start_iteration", r.start_iteration},
          {"iterations_done", r.iterations_done},
          {"final_test_loss", fixed(r.test_loss, 6)},
          {"layers", layer_table(r)},
          {"checksums_equal", equal},
          {"checksum", hex(r.checksum)},
          {"rank_checksums", sums},
          {"predictions", preds}};
}

void print_cnn_table(const sfb::Config& cfg, const sfb::cnn::ExecutorResult& r, int ranks, bool replicas_equal) {
  using S = sfb::cnn::IterationStats;
  fmt::print("\nmgwfbp run: {} | {} ranks | planner {} | {} groups | batch {} per rank\n", cfg.source, ranks,
             cfg.mgwfbp.planner, r.plan.size(), cfg.optimizer.minibatch);
  fmt::print("  iterations       {}\n  wall time        {:.2f} s\n  test accuracy    {:.2f} %\n", r.iterations.size(),
             r.seconds, 100.0 * r.test_accuracy);
  fmt::print(
      "  iteration        {:.2f} ms measured, {:.2f} ms predicted (forward {:.2f}, backward {:.2f}, comm not "
      "overlapped {:.2f})\n",
      planned_mean(r, &S::iteration_us) / 1e3, planned_mean(r, &S::predicted_us) / 1e3,
      planned_mean(r, &S::forward_us) / 1e3, planned_mean(r, &S::backward_us) / 1e3,
      planned_mean(r, &S::comm_wait_us) / 1e3);
  fmt::print("  bytes sent       {:.3f} MB per iteration and rank (plan {})\n", planned_mean(r, &S::bytes_sent) / 1e6,
             sfb::mgwfbp::describe(r.plan, r.profile));
  fmt::print("  replicas equal   {}\n  params checksum  {:016x}\n", replicas_equal ? "yes" : "NO", r.checksum);
  std::fflush(stdout);
}

}  // namespace sfbd
