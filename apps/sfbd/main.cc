// sfbd: the sfb training daemon. Run as `mpirun -np N sfbd --config job.toml [--set key=value]`.
//
// Exit codes: 0 success (every rank), 2 bad input (config, data, outputs) found before training
// and reported once by rank 0, 3 training failed (MPI_Abort ends every rank), 4 the objective
// diverged.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "job.h"
#include "predict.h"
#include "sfb/api/abi_id.h"
#include "sfb/cnn/cuda/cuda_backend.h"
#include "sfb/cnn/onednn_layers.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/comm/transport/crypto.h"
#include "sfb/comm/transport/latency.h"
#include "sfb/comm/transport/tcp.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/gemm.h"
#include "sfb/core/log.h"
#include "sfb/core/memory.h"
#include "sfb/core/strings.h"
#include "sfb/mgwfbp/planner.h"
#include "sfb/runtime/signals.h"
#include "sfb/runtime/worker.h"
#include "sfb_revision.h"

namespace sfbd {

namespace {

struct Cli {
  std::string config_path;
  std::vector<std::string> overrides;
  bool check_only = false, list_keys = false;
  std::string resume_path;
  std::string evaluate_path;
  std::string profile_path;
  bool partial_profile = false;
  std::string show_key;
  bool show = false;  // --show was given (an empty key is an error, never "train")
  bool find_lr = false;
  std::string predict_path, data_path, out_path;  // --predict MODEL --data FILE --out PRED
  bool probabilities = false;
};

// "sfbd 0.1.0 (plugin ABI 0x..., OpenBLAS ..., oneDNN ..., CUDA ...)": what this binary runs with.
std::string version_string() {
  const bool cuda = sfb::cnn::cuda::built();
  return fmt::format("sfbd {} ({}; plugin ABI {:#x}; {}; {}; {})", SFB_VERSION, SFB_GIT_REVISION,
                     sfb::api::kPluginAbiVersion, sfb::blas_info(), sfb::cnn::onednn_info(),
                     cuda ? "CUDA layers built, " + sfb::cnn::cuda::library_versions() : "built without CUDA");
}

// Parses the command line; returns an exit code when sfbd should exit now (help, version, bad flags).
std::optional<int> parse_cli(int argc, char** argv, int rank, Cli& cli) {
  CLI::App app{"sfbd: sufficient factor broadcasting training daemon"};
  app.add_option("--config,-c", cli.config_path, "TOML job configuration");
  app.add_option("--set", cli.overrides, "Override a config key: --set sfb.staleness=2 (repeatable)");
  app.add_flag("--check", cli.check_only, "Validate the config and exit");
  app.add_option("--resume", cli.resume_path,
                 "Continue from a checkpoint (checkpoint.path of an earlier run), with any number of ranks");
  app.add_option("--evaluate", cli.evaluate_path,
                 "Evaluate a model file (output.model) on the config's data: objective, test accuracy and the "
                 "model's metrics as JSON on stdout; trains nothing")
      ->excludes("--check")
      ->excludes("--resume");
  app.add_option("--profile", cli.profile_path,
                 "job.mode = \"sfb\": measure the scheme profile of this job on these ranks (SF computation, "
                 "updates, broadcast and all-reduce fits; with comm.scheme = \"fms\" and mpirun -np P+S, the FMS "
                 "engine with its S servers too), write it to FILE (JSON, for sfb-plan and comm.auto_profile), "
                 "print every scheme's prediction here, and exit; trains nothing")
      ->excludes("--check")
      ->excludes("--resume")
      ->excludes("--evaluate");
  app.add_flag("--partial-profile", cli.partial_profile,
               "With --profile: write the profile even when an engine run did not fit in the profiler's time "
               "budget (its \"skipped\" says which; without this flag that is an error, exit 3)")
      ->needs("--profile");
  app.add_flag("--find-lr", cli.find_lr,
               "Run optimizer.lr = \"auto\"'s search on these ranks, print every candidate's "
               "objective, write output.dir/lr_search.csv and lr_search.png, and exit; trains nothing")
      ->excludes("--check")
      ->excludes("--evaluate")
      ->excludes("--profile");
  app.add_option("--predict", cli.predict_path,
                 "Predict with a classifier's model file (mlr, l2mlr) the rows of --data FILE (libsvm) into --out "
                 "PRED, in liblinear-predict's format (the training file's own labels); no config needed; trains "
                 "nothing")
      ->excludes("--check")
      ->excludes("--resume")
      ->excludes("--evaluate")
      ->excludes("--profile")
      ->excludes("--find-lr");
  app.add_option("--data", cli.data_path, "--predict: the libsvm file whose rows to predict");
  app.add_option("--out", cli.out_path, "--predict: the predictions file to write");
  app.add_flag("--probabilities,-b", cli.probabilities,
               "--predict: each row's class probabilities too, after a \"labels ...\" line (liblinear -b 1)");
  auto* show =
      app.add_option("--show", cli.show_key,
                     "Print the resolved value of one config key (after --set) as TOML text, or with "
                     "checkpoint.file, output.model_file or output.metrics_file the path sfbd would write, then exit");
  app.set_version_flag("--version", version_string());
  app.add_flag("--keys", cli.list_keys,
               "Print every config key with its type, default and meaning (Markdown), then exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) app.exit(e);
    return e.get_exit_code() == 0 ? kExitOk : kExitBadInput;
  }
  cli.show = show->count() > 0;
  return std::nullopt;
}

// A Markdown table of every config key: configs/README.md embeds this output.
void print_keys() {
  fmt::print("| key | mode | type | default | meaning |\n|---|---|---|---|---|\n");
  for (const auto& k : sfb::config_key_docs()) {
    // The planners from the registry that parses them (core cannot see the mgwfbp layer).
    const std::string help =
        k.key == "mgwfbp.planner" ? fmt::format("{} One of: {}.", k.help, sfb::mgwfbp::planner_list()) : k.help;
    fmt::print("| `{}` | {} | {} | `{}` | {} |\n", k.key, k.mode.empty() ? "both" : k.mode, k.type, k.default_value,
               help);
  }
}

// Rank 0 logs the transport and, for TCP, the congestion control its connections run; bbr without
// comm.tcp_congestion gets a warning: with it sfb's own all-reduce stalled 4-7x at 8 ranks in
// holds of 100-200 ms (BBR v1's PROBE_RTT fits them; not traced further: docs/compare.md), which
// skews every comparison of the dense schemes against SFB.
void report_transport(Job& job) {
  const auto* tcp = dynamic_cast<const sfb::comm::TcpTransport*>(job.transport.get());
  const std::string cc = tcp && job.ranks() > 1 ? tcp->congestion_of(1) : "";
  spdlog::info("transport: {} over {} ranks{}", job.cfg.comm.transport, job.ranks(),
               cc.empty() ? "" : fmt::format(" (TCP congestion control {})", cc));
  if (cc == "bbr" && job.cfg.comm.tcp_congestion.empty())
    spdlog::warn(
        "the TCP connections run bbr, this host's default congestion control: with it sfb's all-reduce stalled "
        "4-7x at 8 ranks (docs/compare.md), which slows the all-reduce and FMS against SFB; "
        "comm.tcp_congestion = \"cubic\" (or \"reno\") selects another for this job");
}

// The transport every rank trains over; false when the ranks disagree on the config (checked
// through MPI first: ranks that disagree on comm.transport could not even connect).
// comm.secret_file read alike on every rank, proven before any rank connects: each rank's digest of
// the secret (8 bytes of SHA-256 under a label of its own, never the secret) over the launcher's
// bootstrap. False when they differ: rank 0 names the file and the ranks (else the set-up ends
// with "a peer is stopped or unreachable", exit 3, naming no setting).
bool secrets_agree(Job& job, const std::string& secret) {
  int64_t digest = 0;
  if (!secret.empty()) {
    const std::string labelled = "sfb comm.secret_file digest\n" + secret;
    const sfb::comm::Digest d = sfb::comm::sha256(std::as_bytes(std::span(labelled.data(), labelled.size())));
    std::memcpy(&digest, d.data(), sizeof(digest));
  }
  const auto all = job.mpi.allgather(digest);
  std::vector<int> differ;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) differ.push_back(static_cast<int>(r));
  if (differ.empty()) return true;
  if (job.rank() == 0)
    fmt::print(stderr,
               "sfbd: error: comm.secret_file = \"{}\": rank(s) {} read another secret than rank 0 (compared by "
               "digest before connecting): every host must hold the same secret file\n",
               job.cfg.comm.secret_file, fmt::join(differ, ", "));
  return false;
}

bool connect(Job& job) {
  try {
    sfb::comm::check_values_equal(job.mpi.allgather(static_cast<int64_t>(job.cfg.fingerprint())),
                                  "the config (after --set overrides)");
  } catch (const sfb::InvalidArgument& e) {
    // Detected on every rank alike; rank 0 reports it.
    if (job.rank() == 0) fmt::print(stderr, "sfbd: error: {}\n", e.what());
    return false;
  }
  // "auto": MPI's shared memory when every rank is on this host, sfb's TCP transport across hosts.
  // The sharded scheme always takes TCP: its one thread waits on every clock's two all-gathers, and
  // MPI's transport cannot block (it polls with a backoff): 3 ranks on 2 cores took 10.8 s for the
  // 120 clocks that took 0.38 s over loopback TCP (configs/synthetic_sparse.toml, sharded, BSP).
  if (job.cfg.comm.transport == sfb::TransportKind::kAuto) {
    const bool one_host = job.mpi.ranks_on_host() == job.mpi.size();
    const bool mpi = one_host && job.cfg.comm.scheme != sfb::Scheme::kSharded;
    job.decide(mpi        ? "comm.transport = \"auto\": every rank on one host"
               : one_host ? "comm.transport = \"auto\": the sharded scheme waits on its all-gathers, which TCP does "
                            "without polling"
                          : "comm.transport = \"auto\": ranks on more than one host",
               [&](sfb::Config& c) { c.comm.transport = mpi ? sfb::TransportKind::kMpi : sfb::TransportKind::kTcp; });
  }
  sfb::comm::TransportOptions opt;
  opt.kind = job.cfg.comm.transport;
  opt.interface = job.cfg.comm.interface;
  opt.connect_timeout_s = job.cfg.runtime.peer_timeout_s;
  opt.congestion = job.cfg.comm.tcp_congestion;
  // A bad comm.interface, comm.secret_file or comm.tcp_congestion is found on every rank before any
  // rank waits in the connection set-up.
  if (opt.kind == sfb::TransportKind::kTcp &&
      !job.all_ok("checking comm.interface, comm.secret_file and comm.tcp_congestion", [&] {
        sfb::comm::check_interface(opt.interface);
        sfb::comm::check_congestion(opt.congestion);
        if (!job.cfg.comm.secret_file.empty()) opt.secret = sfb::comm::read_secret_file(job.cfg.comm.secret_file);
      }))
    return false;
  if (opt.kind == sfb::TransportKind::kTcp && !secrets_agree(job, opt.secret)) return false;
  const bool connected = job.all_ok("connecting the ranks", [&] {
    auto guard = job.waiting_on_peers("connecting the ranks");
    job.transport = job.mpi.make_transport(opt);
  });
  if (!connected) return false;
  if (job.rank() == 0) report_transport(job);
  if (job.cfg.comm.inject_latency_us > 0)
    job.transport =
        std::make_unique<sfb::comm::LatencyTransport>(std::move(job.transport), job.cfg.comm.inject_latency_us);
  job.transport->set_peer_timeout(job.cfg.runtime.peer_timeout_s);
  return true;
}

// runtime.threads = 0 is resolved per host (its cores over its ranks); the ranks agree on the least,
// so uneven layouts (3 ranks on one node, 1 on another) compute their GEMMs alike (OpenBLAS does
// not promise the same sums for different thread counts; BSP replicas must stay bitwise equal).
// Then every rank's BLAS must be the same kernels; false (rank 0 said why) when not.
bool agree_on_compute(Job& job) {
  auto& mpi = job.mpi;
  const auto per_rank = mpi.allgather(sfb::runtime::resolve_threads(job.cfg.runtime, mpi.ranks_on_host()));
  const int threads = static_cast<int>(*std::min_element(per_rank.begin(), per_rank.end()));
  if (job.cfg.runtime.threads == 0 && mpi.rank() == 0 && *std::max_element(per_rank.begin(), per_rank.end()) != threads)
    spdlog::info(
        "runtime.threads = 0: {} thread(s) per rank, the least any host gives its ranks (hosts differ in "
        "cores or ranks; every rank must compute alike)",
        threads);
  job.decide("runtime.threads = 0: the least any host gives its ranks",
             [&](sfb::Config& c) { c.runtime.threads = threads; });
  sfb::set_compute_threads(threads);
  try {
    sfb::comm::check_all_equal(*job.transport, sfb::blas_fingerprint(),
                               fmt::format("the BLAS ({}; set OPENBLAS_CORETYPE and runtime.threads alike on every "
                                           "host)",
                                           sfb::blas_info()));
  } catch (const sfb::InvalidArgument& e) {
    if (mpi.rank() == 0) fmt::print(stderr, "sfbd: error: {}\n", e.what());
    return false;
  }
  return true;
}

// `finalize_s` gets the time MPI_Finalize may take (runtime.peer_timeout_s once the config is read).
int run(int argc, char** argv, sfb::comm::MpiSession& mpi, Watchdog& watchdog, double& finalize_s) {
  Cli cli;
  if (auto code = parse_cli(argc, argv, mpi.rank(), cli)) return *code;
  if (cli.list_keys) {
    if (mpi.rank() == 0) print_keys();
    return kExitOk;
  }
  if (!cli.predict_path.empty())
    return predict(cli.predict_path, cli.data_path, cli.out_path, cli.probabilities, mpi.rank());
  if (!cli.data_path.empty() || !cli.out_path.empty() || cli.probabilities) {
    if (mpi.rank() == 0) fmt::print(stderr, "sfbd: error: --data, --out and --probabilities go with --predict MODEL\n");
    return kExitBadInput;
  }
  Job job{sfb::Config{}, mpi, watchdog, nullptr, cli.resume_path, {}, {}};
  const bool loaded = job.all_ok("agreeing on the config", [&] {
    if (cli.config_path.empty()) throw sfb::InvalidArgument("--config is required (try --help)");
    sfb::Config parsed = sfb::load_config(cli.config_path, cli.overrides);
    if (cli.find_lr) parsed.optimizer.lr_auto = true;  // --find-lr is an override like --set
    job.set_parsed(std::move(parsed));
  });
  if (!loaded) return kExitBadInput;
  finalize_s = job.cfg.runtime.peer_timeout_s;
  job.check_only = cli.check_only;
  job.find_lr = cli.find_lr;
  job.profile_path = cli.profile_path;
  if (cli.show) {
    if (mpi.rank() != 0) return kExitOk;
    const auto& c = job.cfg;
    const std::map<std::string, std::string> files = {{"checkpoint.file", c.output.path(c.checkpoint.path)},
                                                      {"output.model_file", c.output.path(c.output.model)},
                                                      {"output.metrics_file", c.output.path(c.output.metrics)}};
    const auto file = files.find(cli.show_key);
    const std::string value = file != files.end() ? file->second : sfb::config_value(c, cli.show_key);
    if (value.empty() && file == files.end()) {
      fmt::print(stderr, "sfbd: error: --show {}: no such config key (sfbd --keys lists them)\n", cli.show_key);
      return kExitBadInput;
    }
    fmt::print("{}\n", value);
    return kExitOk;
  }
  if (!cli.evaluate_path.empty()) {
    sfb::init_logging(mpi.rank(), "warn");
    // Sharded, the ranks evaluate together (each its block of W's rows): they need the transport.
    if (job.cfg.comm.scheme == sfb::Scheme::kSharded && job.cfg.job.mode == sfb::JobMode::kSfb && !connect(job))
      return kExitBadInput;
    return job.cfg.job.mode == sfb::JobMode::kMgwfbp ? evaluate_cnn(job, cli.evaluate_path)
                                                     : evaluate_sfb(job, cli.evaluate_path);
  }
  if (cli.check_only) {
    // Everything training would find before its first clock, without training or writing.
    sfb::init_logging(mpi.rank(), "warn");
    const bool ok = job.cfg.job.mode == sfb::JobMode::kMgwfbp ? check_cnn(job) : check_sfb(job);
    const bool cnn = job.cfg.job.mode == sfb::JobMode::kMgwfbp;
    if (ok && mpi.rank() == 0)
      fmt::print("{}: OK ({}, {} rank{}): config, data, {}{}, outputs and memory checked\n", cli.config_path,
                 cnn ? "mgwfbp, synchronous S-SGD" : job.cfg.sfb.consistency_name(), mpi.size(),
                 mpi.size() == 1 ? "" : "s", cnn ? "network" : "model",
                 cnn                            ? (job.cfg.model.init.empty() ? "" : ", model.init")
                 : job.cfg.model.plugin.empty() ? ""
                                                : ", plugin");
    return ok ? kExitOk : kExitBadInput;
  }
  sfb::init_logging(mpi.rank(), job.cfg.output.log_level);
  sfb::runtime::install_stop_signal_handlers();
  if (!connect(job)) return kExitBadInput;
  if (!agree_on_compute(job)) return kExitBadInput;
  if (!cli.profile_path.empty()) {
    if (job.cfg.job.mode == sfb::JobMode::kMgwfbp) {
      if (mpi.rank() == 0)
        fmt::print(stderr,
                   "sfbd: error: --profile profiles job.mode = \"sfb\"; the CNN mode profiles its layers "
                   "itself (mgwfbp.profile_iters) and mgwfbp-plan predicts it\n");
      return kExitBadInput;
    }
    return profile_sfb(job, cli.profile_path, cli.partial_profile);
  }
  return job.cfg.job.mode == sfb::JobMode::kMgwfbp ? run_cnn(job) : run_sfb(job);
}

}  // namespace
}  // namespace sfbd

int main(int argc, char** argv) {
  sfb::reuse_large_allocations();
  sfb::comm::MpiSession mpi(argc, argv, sfb::comm::MpiSession::Threads::kMultiple);
  sfbd::Watchdog watchdog(mpi);
  int code = sfbd::kExitOk;
  double finalize_s = sfb::RuntimeConfig{}.peer_timeout_s;
  try {
    code = sfbd::run(argc, argv, mpi, watchdog, finalize_s);
  } catch (const sfb::FileChanged& e) {
    // A file verified before training (checkpoint, model.init) was not the one streamed: bad input,
    // found before its first block reached a replica. Nothing was written.
    fmt::print(stderr, "sfbd: rank {}: error: {}\n", mpi.rank(), e.what());
    std::fflush(stderr);
    mpi.abort(sfbd::kExitBadInput);
  } catch (const std::exception& e) {
    // A failure on one rank: the others cannot finish without it, so end the whole job. A failure
    // every rank meets alike (a plugin's contract error) is printed once: rank 0 aborts the job
    // at once, the others wait 3 s for that (mpirun kills them) before they report and abort themselves.
    if (mpi.rank() != 0 && mpi.size() > 1) std::this_thread::sleep_for(std::chrono::seconds(3));
    fmt::print(stderr, "sfbd: rank {}: fatal: {}\n", mpi.rank(), e.what());
    std::fflush(stderr);
    mpi.abort(sfbd::kExitFailed);
  } catch (...) {
    fmt::print(stderr, "sfbd: rank {}: fatal: an exception that is not a std::exception\n", mpi.rank());
    std::fflush(stderr);
    mpi.abort(sfbd::kExitFailed);
  }
  auto guard = watchdog.guard("MPI_Finalize", finalize_s);
  mpi.finalize();
  return code;
}
