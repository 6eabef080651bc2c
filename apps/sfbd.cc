// sfbd: the sfb training daemon. Run as `mpirun -np N sfbd --config job.toml [--set key=value]`.
//
// Exit codes: 0 success (every rank), 2 bad input (config, data) reported by every rank that saw
// it, 3 training failed (MPI_Abort ends every rank), 4 the objective diverged.
#include <cmath>
#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sfb/comm/collectives.h"
#include "sfb/baselines/fms_server.h"
#include "sfb/baselines/make_exchange.h"
#include "sfb/baselines/scheme_bytes.h"
#include "sfb/comm/latency_transport.h"
#include "sfb/comm/mpi_transport.h"
#include "sfb/cnn/executor.h"
#include "sfb/core/config.h"
#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/core/log.h"
#include "sfb/core/files.h"
#include "sfb/core/metrics.h"
#include "sfb/io/checkpoint.h"
#include "sfb/io/load_data.h"
#include "sfb/io/model_file.h"
#include "sfb/models/registry.h"
#include "sfb/runtime/signals.h"
#include "sfb/runtime/study_hooks.h"
#include "sfb/runtime/worker.h"

namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitFailed = 3;
constexpr int kExitDiverged = 4;

// True on every rank when any rank passes `failed`; such ranks print their message.
bool any_rank_failed(bool failed) {
  int mine = failed ? 1 : 0, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any != 0;
}

int ranks_on_this_host() {
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int n = 1;
  MPI_Comm_size(local, &n);
  MPI_Comm_free(&local);
  return n;
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

std::string scheme_name(const sfb::Config& cfg) {
  return cfg.comm.scheme == "sfb" ? "sfb/" + cfg.sfb.broadcast : cfg.comm.scheme;
}

std::string summary_json(const sfb::Config& cfg, const std::string& model_name, const sfb::runtime::WorkerResult& r, int P,
                         int threads, int64_t J, int64_t D) {
  std::string ranks, sums;
  bool equal = true;
  for (const auto& s : r.all) {
    equal = equal && s.checksum == r.all[0].checksum;
    ranks += fmt::format(
        "    {{\"rank\": {}, \"clocks\": {}, \"pairs_sent\": {}, \"pairs_received\": {}, \"pairs_applied\": {}, "
        "\"bytes_sent\": {}, \"bytes_received\": {}, \"compute_s\": {:.6f}, \"update_s\": {:.6f}, \"wait_s\": {:.6f}, "
        "\"max_lead\": {}, \"checksum\": \"{:016x}\"}}{}\n",
        s.rank, s.clocks, s.pairs_sent, s.pairs_received, s.pairs_applied, s.bytes_sent, s.bytes_received, s.compute_s,
        s.update_s, s.wait_s, s.max_lead, s.checksum, s.rank + 1 < P ? "," : "");
    sums += fmt::format("{}\"{:016x}\"", sums.empty() ? "" : ", ", s.checksum);
  }
  const auto last = r.evals.empty() ? sfb::EvalRecord{} : r.evals.back();
  std::string extra;
  for (const auto& [k, v] : last.extra)
    extra += fmt::format("{}\"{}\": {}", extra.empty() ? "" : ", ", k, std::isfinite(v) ? fmt::format("{:.8g}", v) : "null");
  const int64_t clocks = r.final_clock - r.start_clock;
  const double measured = clocks > 0 ? static_cast<double>(network_bytes(r)) / static_cast<double>(clocks) : 0.0;
  const double theory = 4.0 * sfb::baselines::theory_floats_per_clock(cfg, P, J, D);
  return fmt::format(
      "{{\n  \"config\": \"{}\",\n  \"scheme\": \"{}\",\n  \"staleness\": {},\n  \"J\": {},\n  \"D\": {},\n"
      "  \"network_bytes\": {},\n  \"bytes_per_clock\": {:.1f},\n  \"theory_bytes_per_clock\": {:.1f},\n"
      "  \"compute_s_mean\": {:.6f},\n  \"update_s_mean\": {:.6f},\n  \"wait_s_mean\": {:.6f},\n"
      "  \"model\": \"{}\",\n  \"ranks\": {},\n  \"threads_per_rank\": {},\n  \"consistency\": \"{}\",\n"
      "  \"broadcast\": \"{}\",\n  \"minibatch\": {},\n  \"stop_reason\": \"{}\",\n  \"final_clock\": {},\n"
      "  \"seconds\": {:.6f},\n  \"final_objective\": {:.8g},\n  \"final_accuracy\": {:.6f},\n  \"final_metrics\": {{{}}},\n"
      "  \"samples_per_s\": {:.3f},\n  \"checksums_equal\": {},\n  \"rank_checksums\": [{}],\n"
      "  \"per_rank\": [\n{}  ]\n}}\n",
      cfg.source, scheme_name(cfg), cfg.sfb.asp() ? std::string("\"inf\"") : std::to_string(cfg.sfb.staleness), J, D,
      network_bytes(r), measured, theory, mean_of(r, &sfb::runtime::RankStats::compute_s),
      mean_of(r, &sfb::runtime::RankStats::update_s), mean_of(r, &sfb::runtime::RankStats::wait_s), model_name, P, threads, cfg.sfb.consistency_name(), cfg.sfb.broadcast, cfg.optimizer.minibatch, r.stop_reason, r.final_clock,
      r.seconds, last.objective, last.accuracy, extra, r.seconds > 0 ? static_cast<double>(r.final_clock) * P * cfg.optimizer.minibatch / r.seconds : 0.0,
      equal ? "true" : "false", sums, ranks);
}

void print_table(const sfb::Config& cfg, const sfb::runtime::WorkerResult& r, int P, int threads) {
  const auto last = r.evals.empty() ? sfb::EvalRecord{} : r.evals.back();
  fmt::print("\nsfb run: {} | {} workers x {} thread(s) | {} | scheme {} | K = {}\n", cfg.source, P, threads,
             cfg.sfb.consistency_name(), scheme_name(cfg), cfg.optimizer.minibatch);
  fmt::print("  stop reason      {}\n", r.stop_reason);
  fmt::print("  clocks           {}\n", r.final_clock);
  fmt::print("  wall time        {:.2f} s\n", r.seconds);
  fmt::print("  final objective  {:.5f}\n", last.objective);
  if (last.accuracy >= 0) fmt::print("  test accuracy    {:.2f} %\n", 100.0 * last.accuracy);
  for (const auto& [k, v] : last.extra) fmt::print("  {:<16} {:.5g}\n", k, v);
  fmt::print("  throughput       {:.0f} samples/s\n",
             r.seconds > 0 ? static_cast<double>(r.final_clock) * P * cfg.optimizer.minibatch / r.seconds : 0.0);
  const int64_t clocks = r.final_clock - r.start_clock;
  if (clocks > 0)
    fmt::print("  network          {:.3f} MB per clock (all ranks)\n",
               static_cast<double>(network_bytes(r)) / static_cast<double>(clocks) / 1e6);
  fmt::print("\n  {:>4} {:>7} {:>11} {:>11} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n", "rank", "clocks", "pairs sent",
             "pairs recv", "pairs applied", "MB sent", "MB recv", "compute s", "update s", "wait s", "W checksum");
  for (const auto& s : r.all) {
    fmt::print("  {:>4} {:>7} {:>11} {:>11} {:>12} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f}  {:016x}\n", s.rank,
               s.clocks, s.pairs_sent, s.pairs_received, s.pairs_applied, s.bytes_sent / 1e6, s.bytes_received / 1e6,
               s.compute_s, s.update_s, s.wait_s, s.checksum);
  }
  std::fflush(stdout);
}

// job.mode = "mgwfbp": data-parallel CNN training with merged all-reduces (sfb/cnn/executor.h).
int run_mgwfbp(const sfb::Config& cfg, sfb::comm::Transport& transport, int rank, int P) {
  std::string error;
  sfb::io::LoadedData data;
  try {
    SFB_CHECK(cfg.sfb.staleness == 0, "job.mode = \"mgwfbp\" is synchronous S-SGD: sfb.staleness must be 0, got {}",
              cfg.sfb.consistency_name());
    data = sfb::io::load_data(cfg, rank, P, rank == 0);
  } catch (const sfb::Error& e) {
    error = e.what();
  }
  if (any_rank_failed(!error.empty())) {
    if (!error.empty()) spdlog::error("{}", error);
    return kExitBadInput;
  }
  sfb::cnn::ExecutorResult r;
  try {
    sfb::cnn::Executor ex(cfg, transport, data.train, rank == 0 ? &data.test : nullptr);
    r = ex.run();
  } catch (const sfb::InvalidArgument& e) {
    // Raised alike on every rank before training (network spec, shapes).
    if (rank == 0) fmt::print(stderr, "sfbd: error: {}\n", e.what());
    return kExitBadInput;
  }
  const auto sums = sfb::comm::allgather_i64(transport, static_cast<int64_t>(r.checksum));
  if (rank == 0) {
    bool equal = true;
    for (auto c : sums) equal = equal && c == sums[0];
    auto mean = [&](double sfb::cnn::IterationStats::*m) {
      double s = 0;
      int n = 0;
      for (const auto& it : r.iterations)
        if (it.predicted_us > 0) s += it.*m, ++n;
      return n > 0 ? s / n : 0.0;
    };
    fmt::print("\nmgwfbp run: {} | {} ranks | planner {} | {} groups | batch {} per rank\n", cfg.source, P,
               cfg.mgwfbp.planner, r.plan.size(), cfg.optimizer.minibatch);
    fmt::print("  iterations       {}\n  wall time        {:.2f} s\n  test accuracy    {:.2f} %\n", r.iterations.size(),
               r.seconds, 100.0 * r.test_accuracy);
    fmt::print("  iteration        {:.2f} ms measured, {:.2f} ms predicted (forward {:.2f}, backward {:.2f}, comm not "
               "overlapped {:.2f})\n",
               mean(&sfb::cnn::IterationStats::iteration_us) / 1e3, mean(&sfb::cnn::IterationStats::predicted_us) / 1e3,
               mean(&sfb::cnn::IterationStats::forward_us) / 1e3, mean(&sfb::cnn::IterationStats::backward_us) / 1e3,
               mean(&sfb::cnn::IterationStats::comm_wait_us) / 1e3);
    fmt::print("  replicas equal   {}\n  params checksum  {:016x}\n", equal ? "yes" : "NO", r.checksum);
    if (!cfg.output.summary.empty() && !cfg.output.dir.empty()) {
      std::string preds;
      for (const auto& p : r.predictions)
        preds += fmt::format("{}{{\"planner\": \"{}\", \"groups\": {}, \"iteration_us\": {:.1f}, \"non_overlapped_us\": {:.1f}}}",
                             preds.empty() ? "" : ", ", p.planner, p.groups, p.iteration_us, p.non_overlapped_us);
      const std::string json = fmt::format(
          "{{\n  \"config\": \"{}\",\n  \"mode\": \"mgwfbp\",\n  \"ranks\": {},\n  \"planner\": \"{}\",\n"
          "  \"groups\": {},\n  \"plan\": \"{}\",\n  \"a_us\": {:.3f},\n  \"b_us_per_byte\": {:.6e},\n"
          "  \"iterations\": {},\n  \"seconds\": {:.6f},\n  \"final_accuracy\": {:.6f},\n"
          "  \"iteration_us\": {:.1f},\n  \"predicted_us\": {:.1f},\n  \"forward_us\": {:.1f},\n  \"backward_us\": {:.1f},\n"
          "  \"comm_wait_us\": {:.1f},\n  \"replans\": {},\n  \"checksums_equal\": {},\n  \"checksum\": \"{:016x}\",\n"
          "  \"predictions\": [{}]\n}}\n",
          cfg.source, P, cfg.mgwfbp.planner, r.plan.size(), sfb::mgwfbp::describe(r.plan), r.cost.a_us, r.cost.b_us_per_byte,
          r.iterations.size(), r.seconds, r.test_accuracy, mean(&sfb::cnn::IterationStats::iteration_us),
          mean(&sfb::cnn::IterationStats::predicted_us), mean(&sfb::cnn::IterationStats::forward_us),
          mean(&sfb::cnn::IterationStats::backward_us), mean(&sfb::cnn::IterationStats::comm_wait_us), r.replans,
          equal ? "true" : "false", r.checksum, preds);
      sfb::write_file_atomic((std::filesystem::path(cfg.output.dir) / cfg.output.summary).string(), json);
    }
  }
  return 0;
}

int run(int argc, char** argv, int rank, int P) {
  CLI::App app{"sfbd: sufficient factor broadcasting training daemon"};
  std::string config_path;
  std::vector<std::string> overrides;
  bool check_only = false, list_keys = false;
  std::string resume_path;
  app.add_option("--config,-c", config_path, "TOML job configuration");
  app.add_option("--set", overrides, "Override a config key: --set sfb.staleness=2 (repeatable)");
  app.add_flag("--check", check_only, "Validate the config and exit");
  app.add_option("--resume", resume_path,
                 "Continue from a checkpoint (checkpoint.path of an earlier run), with any number of ranks");
  app.add_flag("--keys", list_keys, "Print every config key with its type, default and meaning (Markdown), then exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) app.exit(e);
    return e.get_exit_code() == 0 ? 0 : kExitBadInput;
  }
  if (list_keys) {
    if (rank == 0)
    {
      // A Markdown table: configs/README.md embeds this output.
      fmt::print("| key | type | default | meaning |\n|---|---|---|---|\n");
      for (const auto& k : sfb::config_key_docs())
        fmt::print("| `{}` | {} | `{}` | {} |\n", k.key, k.type, k.default_value, k.help);
    }
    return 0;
  }

  sfb::Config cfg;
  std::string error;
  try {
    if (config_path.empty()) throw sfb::InvalidArgument("--config is required (try --help)");
    cfg = sfb::load_config(config_path, overrides);
  } catch (const sfb::Error& e) {
    error = e.what();
  }
  if (any_rank_failed(!error.empty())) {
    if (!error.empty() && rank == 0) fmt::print(stderr, "sfbd: error: {}\n", error);
    return kExitBadInput;
  }
  if (check_only) {
    if (rank == 0) fmt::print("{}: OK ({}, {} ranks)\n", config_path, cfg.sfb.consistency_name(), P);
    return 0;
  }
  sfb::init_logging(rank, cfg.output.log_level);
  sfb::runtime::install_stop_signal_handlers();
  std::unique_ptr<sfb::comm::Transport> transport = sfb::comm::make_mpi_transport(MPI_COMM_WORLD);
  if (cfg.comm.inject_latency_us > 0)
    transport = std::make_unique<sfb::comm::LatencyTransport>(std::move(transport), cfg.comm.inject_latency_us);
  try {
    sfb::comm::check_all_equal(*transport, cfg.fingerprint(), "the config (after --set overrides)");
  } catch (const sfb::InvalidArgument& e) {
    // Detected on every rank alike; rank 0 reports it.
    if (rank == 0) fmt::print(stderr, "sfbd: error: {}\n", e.what());
    return kExitBadInput;
  }

  const int threads = sfb::runtime::resolve_threads(cfg.runtime, ranks_on_this_host());
  cfg.runtime.threads = threads;
  Eigen::setNbThreads(threads);

  if (cfg.job.mode == "mgwfbp") return run_mgwfbp(cfg, *transport, rank, P);

  sfb::io::LoadedData data;
  sfb::models::ModelPtr model;
  int workers = P;
  const bool server = [&] {
    try {
      workers = sfb::runtime::worker_count(cfg, P);
    } catch (const sfb::Error& e) {
      error = e.what();
    }
    return rank >= workers;
  }();
  try {
    // Parameter-server ranks (comm.scheme = "fms") hold W's rows only: no data, no model.
    if (!server && error.empty()) {
      data = sfb::io::load_data(cfg, rank, workers, rank == 0);
      model = sfb::models::make_model(cfg, data.train, data.total_train, rank, workers);
      SFB_CHECK(cfg.comm.scheme != "fms" || (!model->has_prox() && model->prox_scale(cfg.optimizer.lr) == 1.0),
                "comm.scheme = \"fms\": model \"{}\" has a proximal step, which the parameter servers do not "
                "apply; use comm.scheme = \"sfb\" or \"allreduce\"", model->name());
    }
    if (!cfg.output.dir.empty() && rank == 0) std::filesystem::create_directories(cfg.output.dir);
  } catch (const sfb::Error& e) {
    error = e.what();
  }
  if (any_rank_failed(!error.empty())) {
    if (!error.empty()) spdlog::error("{}", error);
    return kExitBadInput;
  }
  if (!server)
    spdlog::info("model {}: W is {} x {}; {} training rows ({} on this rank), {} features, {} thread(s), {}, scheme {}",
                 model->name(), model->rows(), model->cols(), data.total_train, data.train.n, data.train.dim, threads,
                 cfg.sfb.consistency_name(), cfg.comm.scheme == "sfb" ? "sfb/" + cfg.sfb.broadcast : cfg.comm.scheme);

  // --resume: rank 0 reads and checks the checkpoint, every rank gets its W and clock from rank 0
  // (the file need only exist where rank 0 runs).
  sfb::io::Checkpoint ckpt;
  sfb::runtime::WorkerStart start;
  if (!resume_path.empty()) {
    sfb::Bytes bytes;
    if (rank == 0) {
      try {
        ckpt = sfb::io::read_checkpoint(resume_path);
        SFB_CHECK_DATA(ckpt.fingerprint == cfg.model_fingerprint(),
                       "{}: the checkpoint was written by a job with other model, data or optimizer settings "
                       "(fingerprint {:016x}, this config {:016x}); resume with the config that wrote it",
                       resume_path, ckpt.fingerprint, cfg.model_fingerprint());
        SFB_CHECK_DATA(ckpt.clock < cfg.stop.max_clocks,
                       "{}: the checkpoint is at clock {} and stop.max_clocks is {}: nothing left to train; raise "
                       "stop.max_clocks", resume_path, ckpt.clock, cfg.stop.max_clocks);
        bytes = sfb::io::encode_checkpoint(ckpt);
      } catch (const sfb::Error& e) {
        error = e.what();
      }
    }
    if (any_rank_failed(!error.empty())) {
      if (!error.empty()) fmt::print(stderr, "sfbd: error: {}\n", error);
      return kExitBadInput;
    }
    const auto received = sfb::comm::broadcast_bytes(*transport, 0, bytes);
    ckpt = sfb::io::decode_checkpoint(received, resume_path);
    start = {ckpt.clock, &ckpt.W};
    spdlog::info("resuming from {} at clock {} (written by {} ranks)", resume_path, ckpt.clock, ckpt.ranks);
  }

  if (server) {
    sfb::baselines::FmsServer fms(cfg, *transport);
    const auto st = fms.run();
    spdlog::info("parameter server done: {} clocks, sent {:.2f} MB, received {:.2f} MB, {:.2f} s applying", st.clocks,
                 st.bytes_sent / 1e6, st.bytes_received / 1e6, st.apply_s);
    transport.reset();
    int diverged = 0;
    MPI_Bcast(&diverged, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return diverged ? kExitDiverged : 0;
  }
  auto exchange = sfb::baselines::make_exchange(cfg);
  sfb::runtime::Worker worker(cfg, *transport, data.train, rank == 0 ? &data.test : nullptr, *model,
                              sfb::runtime::with_study_hooks(cfg.runtime, rank), start,
                              exchange.get());
  sfb::runtime::WorkerResult result = worker.run();
  spdlog::info("done at clock {}: sent {} pairs, received {}, applied {}", result.final_clock, result.self.pairs_sent,
               result.self.pairs_received, result.self.pairs_applied);
  if (rank == 0) {
    namespace fs = std::filesystem;
    if (!cfg.output.model.empty()) sfb::io::write_model((fs::path(cfg.output.dir) / cfg.output.model).string(), result.W);
    if (!cfg.output.summary.empty())
      sfb::write_file_atomic((fs::path(cfg.output.dir) / cfg.output.summary).string(), summary_json(cfg, model->name(), result, workers, threads, model->rows(), model->cols()));
    print_table(cfg, result, workers, threads);
  }
  transport.reset();
  int diverged = rank == 0 && result.stop_reason == "diverged" ? 1 : 0;
  MPI_Bcast(&diverged, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return diverged ? kExitDiverged : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int code = 0;
  try {
    code = run(argc, argv, rank, P);
  } catch (const std::exception& e) {
    // A failure on one rank: the others cannot finish without it, so end the whole job.
    fmt::print(stderr, "sfbd: rank {}: fatal: {}\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitFailed);
  }
  MPI_Finalize();
  return code;
}
