// sfbd: the sfb training daemon. Run as `mpirun -np N sfbd --config job.toml [--set key=value]`.
//
// Exit codes: 0 success (every rank), 2 bad input (config, data) reported by every rank that saw
// it, 3 training failed (MPI_Abort ends every rank), 4 the objective diverged.
#include <cstdio>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <Eigen/Core>

#include "job.h"
#include "sfb/comm/collectives.h"
#include "sfb/comm/latency_transport.h"
#include "sfb/core/error.h"
#include "sfb/core/log.h"
#include "sfb/runtime/signals.h"
#include "sfb/runtime/worker.h"

namespace sfbd {

bool all_ranks_ok(const sfb::comm::MpiSession& mpi, const std::function<void()>& step, bool root_reports) {
  std::string error;
  try {
    step();
  } catch (const sfb::Error& e) {
    error = e.what();
  }
  if (!mpi.any(!error.empty())) return true;
  if (!error.empty()) {
    if (root_reports && mpi.rank() == 0) fmt::print(stderr, "sfbd: error: {}\n", error);
    if (!root_reports) spdlog::error("{}", error);
  }
  return false;
}

namespace {

struct Cli {
  std::string config_path;
  std::vector<std::string> overrides;
  bool check_only = false, list_keys = false;
  std::string resume_path;
};

// Parses the command line; returns an exit code when sfbd should exit now (help, bad flags).
std::optional<int> parse_cli(int argc, char** argv, int rank, Cli& cli) {
  CLI::App app{"sfbd: sufficient factor broadcasting training daemon"};
  app.add_option("--config,-c", cli.config_path, "TOML job configuration");
  app.add_option("--set", cli.overrides, "Override a config key: --set sfb.staleness=2 (repeatable)");
  app.add_flag("--check", cli.check_only, "Validate the config and exit");
  app.add_option("--resume", cli.resume_path,
                 "Continue from a checkpoint (checkpoint.path of an earlier run), with any number of ranks");
  app.add_flag("--keys", cli.list_keys,
               "Print every config key with its type, default and meaning (Markdown), then exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) app.exit(e);
    return e.get_exit_code() == 0 ? kExitOk : kExitBadInput;
  }
  return std::nullopt;
}

// A Markdown table of every config key: configs/README.md embeds this output.
void print_keys() {
  fmt::print("| key | type | default | meaning |\n|---|---|---|---|\n");
  for (const auto& k : sfb::config_key_docs())
    fmt::print("| `{}` | {} | `{}` | {} |\n", k.key, k.type, k.default_value, k.help);
}

// The transport every rank trains over; false when the ranks disagree on the config.
bool connect(Job& job) {
  job.transport = job.mpi.make_transport();
  if (job.cfg.comm.inject_latency_us > 0)
    job.transport =
        std::make_unique<sfb::comm::LatencyTransport>(std::move(job.transport), job.cfg.comm.inject_latency_us);
  try {
    sfb::comm::check_all_equal(*job.transport, job.cfg.fingerprint(), "the config (after --set overrides)");
  } catch (const sfb::InvalidArgument& e) {
    // Detected on every rank alike; rank 0 reports it.
    if (job.rank() == 0) fmt::print(stderr, "sfbd: error: {}\n", e.what());
    return false;
  }
  return true;
}

int run(int argc, char** argv, sfb::comm::MpiSession& mpi) {
  Cli cli;
  if (auto code = parse_cli(argc, argv, mpi.rank(), cli)) return *code;
  if (cli.list_keys) {
    if (mpi.rank() == 0) print_keys();
    return kExitOk;
  }
  Job job{sfb::Config{}, mpi, nullptr, cli.resume_path};
  const bool loaded = all_ranks_ok(
      mpi,
      [&] {
        if (cli.config_path.empty()) throw sfb::InvalidArgument("--config is required (try --help)");
        job.cfg = sfb::load_config(cli.config_path, cli.overrides);
      },
      true);
  if (!loaded) return kExitBadInput;
  if (cli.check_only) {
    if (mpi.rank() == 0)
      fmt::print("{}: OK ({}, {} ranks)\n", cli.config_path, job.cfg.sfb.consistency_name(), mpi.size());
    return kExitOk;
  }
  sfb::init_logging(mpi.rank(), job.cfg.output.log_level);
  sfb::runtime::install_stop_signal_handlers();
  if (!connect(job)) return kExitBadInput;
  const int threads = sfb::runtime::resolve_threads(job.cfg.runtime, mpi.ranks_on_host());
  job.cfg.runtime.threads = threads;
  Eigen::setNbThreads(threads);
  return job.cfg.job.mode == "mgwfbp" ? run_cnn(job) : run_sfb(job);
}

}  // namespace
}  // namespace sfbd

int main(int argc, char** argv) {
  sfb::comm::MpiSession mpi(argc, argv, sfb::comm::MpiSession::Threads::kMultiple);
  int code = sfbd::kExitOk;
  try {
    code = sfbd::run(argc, argv, mpi);
  } catch (const std::exception& e) {
    // A failure on one rank: the others cannot finish without it, so end the whole job.
    fmt::print(stderr, "sfbd: rank {}: fatal: {}\n", mpi.rank(), e.what());
    std::fflush(stderr);
    mpi.abort(sfbd::kExitFailed);
  }
  return code;
}
