// job.mode = "mgwfbp": data-parallel CNN training with merged all-reduces (sfb/cnn/executor.h), its
// model files, checkpoints and --resume, and --evaluate of a CNN model file.
#include <cmath>
#include <limits>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "job.h"
#include "lr_search.h"
#include "machine.h"
#include "report.h"
#include "sfb/cnn/cnn_file.h"
#include "sfb/cnn/cuda/cuda_backend.h"
#include "sfb/cnn/executor.h"
#include "sfb/cnn/replanner.h"
#include "sfb/cnn/run_log.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/io/load_data.h"
#include "sfb/io/sampler.h"
#include "sfb/mgwfbp/profile.h"
#include "sfb/runtime/signals.h"

namespace sfbd {

namespace {

struct Setup {
  sfb::io::LoadedData data;
  sfb::cnn::CnnFile init;        // model.init (rank 0 reads it, every rank gets it)
  sfb::cnn::CnnFile checkpoint;  // --resume
  bool has_init = false, has_checkpoint = false;
};

// The network of this config on `data`, as a file describes it.
sfb::cnn::NetworkSpec spec_of(const sfb::Config& cfg, const sfb::io::Dataset& data) {
  sfb::cnn::Network net = sfb::cnn::make_network(cfg.cnn, data);
  return sfb::cnn::network_spec(net, cfg.cnn.input);
}

// Throws DataError naming the file when the checkpoint cannot continue this job (max_clocks resolved).
void check_resumable(const sfb::Config& cfg, const std::string& path, const sfb::cnn::CnnFile& ck,
                     const sfb::cnn::NetworkSpec& net) {
  sfb::cnn::check_same_network(ck.network, net, path);
  SFB_CHECK_DATA(ck.fingerprint == cfg.cnn_fingerprint(),
                 "{}: the checkpoint was written by a job with other data, optimizer or cnn settings (fingerprint "
                 "{:016x}, this config {:016x}); resume with the config that wrote it",
                 path, ck.fingerprint, cfg.cnn_fingerprint());
  SFB_CHECK_DATA(ck.iteration < cfg.stop.max_clocks,
                 "{}: the checkpoint is at iteration {} and the run stops at {}: nothing left to train; raise "
                 "stop.max_clocks",
                 path, ck.iteration, cfg.stop.max_clocks);
}

// Outputs, data, memory, model.init and the checkpoint of --resume (rank 0 reads the files), checked
// on every rank; false when any rank found bad input. Sets stop.max_clocks.
bool set_up(Job& job, Setup& s) {
  const auto& cfg = job.cfg;
  return job.all_ok("agreeing that the data loaded", [&] {
    SFB_CHECK(cfg.sfb.staleness == 0, "job.mode = \"mgwfbp\" is synchronous S-SGD: sfb.staleness must be 0, got {}",
              cfg.sfb.consistency_name());
    sfb::cnn::check_planner(cfg.mgwfbp);
    // device = "cuda" needs a device on every host: found before anything is written.
    if (cfg.job.device == sfb::Device::kCuda) {
      std::string why;
      if (sfb::cnn::cuda::device_count(&why) == 0) throw sfb::InvalidArgument("device = \"cuda\": " + why);
    }
    job.claim_outputs();
    const int64_t available = sfb::available_memory_bytes(job.mpi.ranks_on_host());
    sfb::io::data_memory(cfg.data, job.rank(), job.ranks(), job.rank() == 0).check(available, "loading the data");
    s.data = sfb::io::load_data(cfg.data, cfg.job.seed, job.rank(), job.ranks(), job.rank() == 0);
    sfb::cnn::cnn_memory(cfg, s.data.train).check(sfb::available_memory_bytes(job.mpi.ranks_on_host()), "this CNN");
    job.decide("stop.max_epochs over the training rows of every rank", [&](sfb::Config& c) {
      c.stop.max_clocks = c.stop.clock_limit(s.data.total_train, job.ranks() * c.optimizer.minibatch);
    });
    if (job.rank() != 0) return;
    const auto net = spec_of(cfg, s.data.train);
    if (!cfg.model.init.empty()) {
      s.init = sfb::cnn::read_cnn_file(cfg.model.init, false);
      sfb::cnn::check_same_network(s.init.network, net, "model.init = " + cfg.model.init);
      s.has_init = true;
    }
    if (!job.resume_path.empty()) {
      s.checkpoint = sfb::cnn::read_cnn_file(job.resume_path, true);
      check_resumable(cfg, job.resume_path, s.checkpoint, net);
      s.has_checkpoint = true;
    }
  });
}

// Rank 0's file (model.init, --resume) on every rank: it need only exist where rank 0 runs.
void share(Job& job, bool& has, sfb::cnn::CnnFile& f, const std::string& name) {
  const auto flags = sfb::comm::allgather_i64(*job.transport, has ? 1 : 0);
  if (!flags[0]) return;
  const sfb::Bytes bytes = job.rank() == 0 ? sfb::cnn::encode_cnn_file(f) : sfb::Bytes();
  f = sfb::cnn::decode_cnn_file(sfb::comm::broadcast_bytes(*job.transport, 0, bytes), name);
  has = true;
}

// Ranks on this host beyond its cores make every timing (and the fitted cost, and so the
// predictions) a measure of contention: said in the log and the summary.
sfb::Json contention(const Job& job) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int here = job.mpi.ranks_on_host();
  const bool over = here > cores;
  if (over && job.rank() == 0)
    spdlog::warn(
        "{} ranks share this host's {} cores: forward/backward times, the fitted all-reduce cost and the "
        "predictions measure contention for cores, not the network",
        here, cores);
  return {{"ranks_on_host", here}, {"cores", cores}, {"oversubscribed", over}};
}

// Rank 0's outputs; false when one could not be written (each is atomic: the previous file stays).
bool write_outputs(const Job& job, const sfb::cnn::ExecutorResult& r, const std::vector<int64_t>& sums,
                   const sfb::Json& contended, const sfb::Json& lr_search) {
  const auto& cfg = job.cfg;
  bool ok = true;
  const auto attempt = [&](const std::string& what, const std::function<void()>& write) {
    ok = write_output(cfg, what, write) && ok;
  };
  if (const auto path = cfg.output.path(cfg.output.model); !path.empty()) {
    if (r.diverged_at >= 0)
      spdlog::error("{} not written: the run diverged at iteration {}", path, r.diverged_at + 1);
    else
      attempt(path, [&] { sfb::cnn::write_cnn_file(path, sfb::cnn::model_file(cfg, job.ranks(), r)); });
  }
  sfb::Json summary = cnn_summary(cfg, r, job.ranks(), sums);
  summary["contention"] = contended;
  summary["lr_search"] = lr_search;
  print_cnn_table(cfg, r, job.ranks(), summary["checksums_equal"].get<bool>());
  if (contended["oversubscribed"].get<bool>())
    fmt::print("  WARNING          {} ranks on {} cores: the times and predictions above measure contention\n",
               contended["ranks_on_host"].get<int>(), contended["cores"].get<int>());
  if (r.stop_reason == sfb::StopReason::kSignal)
    fmt::print("  stopped          by a signal after iteration {}\n", r.iterations_done);
  if (const auto path = cfg.output.path(cfg.output.summary); !path.empty())
    attempt(path, [&] { sfb::write_file_atomic(path, sfb::to_document(summary)); });
  // The live profile (none when the run ended before planning), for mgwfbp-plan at other sizes.
  if (const auto path = cfg.output.path(cfg.output.profile); !path.empty() && r.profile.size() > 0)
    attempt(path, [&] {
      sfb::mgwfbp::write_profile_csv(
          path, r.profile,
          fmt::format("measured by sfbd ({}, {} ranks, batch {} per rank); t_f is not per layer: the whole forward "
                      "pass took {:.0f} us\nmgwfbp-plan --profile {} --forward-ms {:.3f} --network "
                      "ab:{:.3f},{:.6g},{:.3f},{:.6g} "
                      "--nodes {}",
                      cfg.source, job.ranks(), cfg.optimizer.minibatch, r.profile.forward_us, path,
                      r.profile.forward_us / 1e3, r.cost.a_us, r.cost.b_us_per_byte, r.cost.ag_a_us,
                      r.cost.ag_b_us_per_byte, job.ranks()));
    });
  return ok;
}

// One trial of optimizer.lr = "auto" (lr_search.h): `iters` iterations from the run's start with
// `opt`, nothing written or evaluated on the way, rank 0 drawing its minibatches from the rows
// `held` leaves it; rank 0 scores the held-out rows (accuracy, mean cross-entropy) after it, and
// every rank learns the score (+inf after a diverged trial). The start's score is the same for
// every trial: measured by the first (a run of no iterations) into `at_start`, then reused.
std::pair<sfb::LrScore, sfb::LrScore> cnn_lr_trial(Job& job, const Setup& s, const sfb::cnn::ExecutorStart& start,
                                                   const LrHoldout& held, const sfb::OptimizerConfig& opt,
                                                   int64_t iters, std::optional<sfb::LrScore>& at_start) {
  sfb::Config c = job.cfg;
  c.optimizer = opt;
  const int64_t first = start.checkpoint ? start.checkpoint->iteration : 0;
  const auto run = [&](int64_t to) {
    c.stop.max_clocks = to;
    c.eval.every = to + 1;
    c.checkpoint.path.clear();
    c.output.metrics = c.output.trace = "";
    sfb::cnn::ExecutorHooks hooks;
    hooks.allreduce = allreduce_factory(c);
    if (held.train_rows > 0)
      hooks.batch = [sampler = sfb::io::EpochSampler(held.train_rows, c.job.seed, 0), k = c.optimizer.minibatch](
                        int64_t, std::vector<int64_t>& rows) mutable { sampler.next(k, rows); };
    return sfb::cnn::Executor(c, *job.transport, s.data.train, nullptr, std::move(hooks), job.mpi.local_rank(), start)
        .run();
  };
  // Rank 0's score of a trial's weights, sent to every rank.
  const auto score = [&](const sfb::cnn::ExecutorResult& r) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    double loss = -kInf, accuracy = -kInf;  // ranks other than 0 do not evaluate
    if (job.rank() == 0) {
      loss = kInf, accuracy = -1;  // a diverged trial
      if (r.diverged_at < 0) {
        sfb::cnn::Network net = sfb::cnn::make_network(c.cnn, s.data.train);
        sfb::cnn::set_params(net, r.params, "the learning-rate trial");
        const auto t = sfb::cnn::evaluate(net, held.rows.n > 0 ? held.rows : s.data.train);
        loss = std::isfinite(t.loss) ? t.loss : kInf, accuracy = t.accuracy;
      }
    }
    return sfb::LrScore{job.mpi.max(accuracy), job.mpi.max(loss)};
  };
  if (!at_start) at_start = score(run(first));  // the start's weights, no step taken
  return {*at_start, score(run(first + iters))};
}

}  // namespace

bool check_cnn(Job& job) {
  Setup s;
  if (!set_up(job, s)) return false;

  // The network spec against the data's shape, as the executor builds it.
  return job.all_ok("checking the network", [&] { sfb::cnn::make_network(job.cfg.cnn, s.data.train); });
}

int run_cnn(Job& job) {
  const auto& cfg = job.cfg;
  Setup s;
  if (!set_up(job, s)) return kExitBadInput;
  share(job, s.has_init, s.init, "model.init = " + cfg.model.init);
  share(job, s.has_checkpoint, s.checkpoint, job.resume_path);
  // A resumed run traces into <trace>.from-F.json: claimed like every output, before any work.
  if (s.has_checkpoint && !cfg.output.trace.empty() && !job.all_ok("claiming the resumed run's trace", [&] {
        const auto name = sfb::cnn::trace_path_of(cfg.output.path(cfg.output.trace), s.checkpoint.iteration);
        job.claim_output(name, fmt::format("output.trace (this resumed run's trace, {})", name));
      }))
    return kExitBadInput;
  sfb::Json contended = contention(job);
  sfb::cnn::ExecutorStart start;
  if (s.has_checkpoint) {
    start.checkpoint = &s.checkpoint;
    spdlog::info("resuming from {} at iteration {} (written by {} ranks)", job.resume_path, s.checkpoint.iteration,
                 s.checkpoint.ranks);
  } else if (s.has_init) {
    start.init = &s.init;
    spdlog::info("starting from the weights of {} (model.init, trained {} iterations)", cfg.model.init,
                 s.init.iteration);
  }
  sfb::Json lr_search = nullptr;
  if (s.has_checkpoint) reuse_checkpoint_lr(job, s.checkpoint.lr, job.resume_path, lr_search);
  if (cfg.optimizer.lr_auto) {
    const LrHoldout held = lr_holdout(job, s.data.train);
    std::optional<sfb::LrScore> at_start;
    const auto code = resolve_lr(
        job, start.checkpoint ? start.checkpoint->iteration : 0, "iterations", held,
        [&](const sfb::OptimizerConfig& opt, int64_t iters) {
          return cnn_lr_trial(job, s, start, held, opt, iters, at_start);
        },
        lr_search);
    if (code) return *code;
    if (job.find_lr) return report_lr_search(job, lr_search);
  }
  job.record_config();  // as in sfb mode: with the clock limit stop.max_epochs gives, and the rate chosen
  sfb::cnn::ExecutorResult r;
  try {
    sfb::cnn::ExecutorHooks hooks;
    hooks.allreduce = allreduce_factory(cfg);
    hooks.stop_signal = [] { return sfb::runtime::stop_signal(); };
    sfb::cnn::Executor ex(cfg, *job.transport, s.data.train, job.rank() == 0 ? &s.data.test : nullptr, std::move(hooks),
                          job.mpi.local_rank(), start);
    const sfb::MachineWatch watch(job.rank() == 0);  // rank 0 writes the summary
    r = ex.run();
    contended["cpu_stolen_share"] = stolen_share_json(watch.stolen_share());
  } catch (const sfb::InvalidArgument& e) {
    // Raised alike on every rank before training (network spec, shapes).
    if (job.rank() == 0) fmt::print(stderr, "sfbd: error: {}\n", e.what());
    return kExitBadInput;
  }
  const auto sums = sfb::comm::allgather_i64(*job.transport, static_cast<int64_t>(r.checksum));
  int code = r.diverged_at >= 0 ? kExitDiverged : kExitOk;
  if (job.rank() == 0 && !write_outputs(job, r, sums, contended, lr_search) && code == kExitOk) code = kExitFailed;
  job.transport.reset();
  auto guard = job.waiting_on_peers("learning how the job ended");
  return job.mpi.broadcast(code, 0);  // every rank exits with rank 0's code
}

int evaluate_cnn(Job& job, const std::string& path) {
  const auto& cfg = job.cfg;
  sfb::io::LoadedData data;
  sfb::cnn::CnnFile f;
  const bool ok = job.all_ok("agreeing that the model file and data loaded", [&] {
    if (job.rank() != 0) return;
    // The test set and the objective's sample of the training set (eval.train_sample rows).
    const sfb::io::LoadRequest req{0, 1, true, cfg.eval.train_sample};
    sfb::io::data_memory(cfg.data, req).check(sfb::available_memory_bytes(1), "loading the data");
    data = sfb::io::load_data(cfg.data, cfg.job.seed, req);
    sfb::cnn::cnn_memory(cfg, data.train).check(sfb::available_memory_bytes(1), "this CNN");
    f = sfb::cnn::read_cnn_file(path, std::nullopt);  // a model file or a checkpoint: both hold the weights
    sfb::cnn::check_same_network(f.network, spec_of(cfg, data.train), path);
  });
  if (!ok) return kExitBadInput;
  if (job.rank() != 0) return kExitOk;
  sfb::cnn::Network net = sfb::cnn::make_network(cfg.cnn, data.train);
  sfb::cnn::set_params(net, f.params, path);
  const auto test = sfb::cnn::evaluate(net, data.test);
  const auto sample = sfb::cnn::evaluate(net, data.eval_sample);
  const auto num = [](double v) { return v < 0 ? sfb::Json(nullptr) : sfb::Json(sfb::sig(v, 8)); };
  const sfb::Json j = {{"model_file", path},
                       {"file_kind", f.checkpoint ? "checkpoint" : "model file"},
                       {"mode", "mgwfbp"},
                       {"network", net.describe()},
                       {"parameters", f.params.size()},
                       {"iterations_trained", f.iteration},
                       {"trained_on_ranks", f.ranks},
                       {"test_rows", data.test.n},
                       {"test_loss", num(test.loss)},
                       {"test_accuracy", num(test.accuracy)},
                       {"train_sample_rows", data.eval_sample.n},
                       {"train_sample_loss", num(sample.loss)},
                       {"train_sample_accuracy", num(sample.accuracy)}};
  fmt::print("{}", sfb::to_document(j));
  return kExitOk;
}

}  // namespace sfbd
