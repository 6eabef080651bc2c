// job.mode = "sfb": a worker per rank (sfb/runtime/worker.h) under the configured scheme, or a
// parameter server on the ranks after the workers (comm.scheme = "fms").
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <thread>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "job.h"
#include "lr_search.h"
#include "machine.h"
#include "predict.h"
#include "report.h"
#include "sfb/baselines/dense_update.h"
#include "sfb/baselines/fms_server.h"
#include "sfb/baselines/make_exchange.h"
#include "sfb/baselines/scheme_bytes.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/hash.h"
#include "sfb/io/checkpoint.h"
#include "sfb/io/load_data.h"
#include "sfb/io/model_file.h"
#include "sfb/models/registry.h"
#include "sfb/predict/crossovers.h"
#include "sfb/predict/scheme_model.h"
#include "sfb/profiler/scheme_profiler.h"
#include "sfb/runtime/job_rules.h"
#include "sfb/runtime/memory_estimate.h"
#include "sfb/runtime/model_prox.h"
#include "sfb/runtime/reconciler.h"
#include "sfb/runtime/sharded_worker.h"
#include "sfb/runtime/still_improving.h"
#include "sfb/runtime/study_hooks.h"
#include "sfb/runtime/worker.h"

namespace sfbd {
namespace {

// The built-in models whose W's rows are the classes' scores (predict.h).
bool is_classifier(const sfb::Config& cfg) {
  return cfg.model.plugin.empty() && (cfg.model.name == "mlr" || cfg.model.name == "l2mlr");
}

struct Setup {
  int workers = 0;
  bool server = false;  // a parameter-server rank: no data, no model
  sfb::io::LoadedData data;
  sfb::models::ModelPtr model;
  bool init_W = false;          // model.init: start from that model file's W (checked, streamed at start)
  sfb::FileSeal init_seal;      // what this rank's check of model.init verified: the stream must read that file
  sfb::FileSeal ckpt_seal;      // rank 0: the same for --resume's checkpoint
  double resumed_lr = 0;        // the rate "auto" resolved to in the checkpoint's job (0: none)
  sfb::Json auto_choice;        // comm.scheme = "auto": the profile, every prediction and the choice
  sfb::Json lr_search;          // optimizer.lr = "auto": every candidate's held-out score and the choice
  sfb::Bytes recorded_profile;  // comm.auto_profile's bytes, checked by rank 0, on every rank
  sfb::MemoryEstimate memory;   // this rank's peak, estimated before training (memory_estimate.h)
  // comm.scheme = "auto": the sharded scheme can train this job (a candidate), and whether W fits
  // replicated on this rank (when it does not on some rank, auto shards without a profile).
  bool shardable = false;
  bool fits_replicated = true;
  double v_floats = 0;       // a training row's stored floats (the memory estimate's v)
  double process_bytes = 0;  // this process's RSS before training
};

// This rank's memory under the config's scheme (memory_estimate.h).
sfb::MemoryEstimate rank_memory(const sfb::Config& cfg, int rank, const Setup& s) {
  const int64_t J = s.model->rows(), D = s.model->cols();
  if (s.server)
    return sfb::runtime::server_memory(cfg, s.workers, J, D, s.model->has_prox() && cfg.fms.servers > 1,
                                       s.process_bytes);
  return sfb::runtime::training_memory(cfg, s.workers, rank, J, D, s.v_floats, s.model->has_prox(),
                                       s.data.eval_sample.n + s.data.test.n, s.process_bytes);
}

// Rank 0: comm.auto_profile's bytes, checked to be a profile of this job's W, K and layout; throws
// DataError naming the file otherwise. A profile of an earlier build, which does not say how W was
// stored, is given this job's layout.
sfb::Bytes read_recorded_profile(const sfb::Config& cfg, const sfb::api::Model& model) {
  const std::string name = "comm.auto_profile = " + cfg.comm.auto_profile;
  sfb::Bytes bytes = sfb::read_file(cfg.comm.auto_profile, "comm.auto_profile", int64_t{64} << 20);
  auto j = sfb::parse_json(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), name);
  const auto p = sfb::predict::profile_from_json(j, name);
  // A profile measured at a smaller K than its job's (job_K) is of that job.
  const auto s = p.job_shape();
  SFB_CHECK_DATA(s.J == model.rows() && s.D == model.cols() && s.K == cfg.optimizer.minibatch,
                 "{}: the profile is of W {} x {} at K = {}, this job's is {} x {} at K = {}", name, s.J, s.D, s.K,
                 model.rows(), model.cols(), cfg.optimizer.minibatch);
  const sfb::Layout mine = model.layout();
  if (j.contains("layout")) {
    SFB_CHECK_DATA(p.layout == mine, "{}: the profile's W was stored {}, this job's is {}", name,
                   sfb::layout_name(p.layout), sfb::layout_name(mine));
    return bytes;
  }
  j["layout"] = std::string(sfb::layout_name(mine));
  const std::string text = j.dump();
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  return {data, data + text.size()};
}

// Rows of `cols` floats that must all be finite on their way to `next` (none: only checked);
// `bad(first, last)` words the DataError for the rows of a block that is not.
sfb::RowSink finite_rows(int64_t cols, std::function<std::string(int64_t, int64_t)> bad, sfb::RowSink next = {}) {
  return [cols, bad = std::move(bad), next = std::move(next)](int64_t r0, int64_t n, const float* data) {
    SFB_CHECK_DATA(Eigen::Map<const Eigen::ArrayXf>(data, n * cols).allFinite(), "{}", bad(r0, r0 + n - 1));
    if (next) next(r0, n, data);
  };
}

// Checks a model file in one streaming pass: its shape fits the model, its CRC holds, every value is
// finite; the rows also go to `into` when given (whose contents are to be discarded when this
// throws). `what` names where the path came from. Throws DataError.
void check_model_file(const std::string& what, const std::string& path, const sfb::api::Model& model,
                      sfb::RowSink into = {}, sfb::FileSeal* seal = nullptr) {
  sfb::io::read_model(
      path,
      [&](int64_t rows, int64_t cols) -> sfb::RowSink {
        SFB_CHECK_DATA(rows == model.rows() && cols == model.cols(),
                       "{} {}: the file's W is {} x {} but model \"{}\" on this data is {} x {}", what, path, rows,
                       cols, model.name(), model.rows(), model.cols());
        return finite_rows(
            cols,
            [what, path](int64_t r0, int64_t r1) {
              return fmt::format("{} {}: W has non-finite values (rows {}..{})", what, path, r0, r1);
            },
            std::move(into));
      },
      nullptr, seal);
}

// comm.scheme = "sharded": the model and the config can train so, and every rank owns rows of W.
void check_shardable(const sfb::Config& cfg, sfb::api::Model& model, int workers) {
  const std::string refusal = sfb::runtime::sharded_refusal(cfg, model);
  SFB_CHECK(refusal.empty(), "{}", refusal);
  SFB_CHECK(model.rows() >= workers,
            "comm.scheme = \"sharded\": W has {} rows for {} ranks; every rank must own at least one: use at most {} "
            "ranks",
            model.rows(), workers, model.rows());
}

// Workers, data and model; false (every rank) when any rank found bad input.
bool set_up(Job& job, Setup& s) {
  const auto& cfg = job.cfg;
  return job.all_ok("agreeing that the data and model loaded", [&] {
    job.claim_outputs();
    const bool sharded = cfg.comm.scheme == sfb::Scheme::kSharded;
    s.workers = sfb::runtime::worker_count(cfg, job.ranks());
    if (sfb::runtime::halton_is_full_broadcast(cfg, s.workers)) {
      if (job.rank() == 0)
        spdlog::warn(
            "sfb.broadcast = \"{}\" with P = {} workers and Q = {} reaches every other worker: that is full "
            "broadcast plus a reconciliation; training with sfb.broadcast = \"full\" (partial broadcast saves "
            "bytes from P = 4 on)",
            cfg.sfb.broadcast, s.workers, *sfb::runtime::halton_receivers(cfg, s.workers));
      job.decide("Halton's receivers are every other worker: full broadcast",
                 [](sfb::Config& c) { c.sfb.broadcast = sfb::Broadcast::kFull; });
    }
    if (cfg.eval.drift_warn < 0) {
      job.decide("eval.drift_warn = \"auto\" for the workers and the broadcast",
                 [&](sfb::Config& c) { c.eval.drift_warn = sfb::runtime::drift_warn_for(c, s.workers); });
      if (job.rank() == 0 && sfb::runtime::partial_broadcast(cfg))
        spdlog::info(
            "eval.drift_warn = \"auto\": {:.3g} (partial broadcast: the drift replicas keep when the updates "
            "they miss are uncorrelated, times 1.5)",
            cfg.eval.drift_warn);
    }
    s.server = job.rank() >= s.workers;
    sfb::runtime::make_topology(cfg, s.workers);  // refuses a broadcast graph with islands
    // A parameter server applies the model's proximal step (fms_server.h), so it builds the model too,
    // on the partition of worker (server index mod P); it trains nothing.
    const int part = s.server ? (job.rank() - s.workers) % s.workers : job.rank();
    const int64_t available = sfb::available_memory_bytes(job.mpi.ranks_on_host());
    // Rank 0 also reads the objective's sample: eval.train_sample rows drawn from the whole file (and
    // the test set); sharded, every rank does, as every rank evaluates its rows. So does every rank
    // of an "auto" job that may choose the sharded scheme (BSP, a rate given).
    const bool may_shard = cfg.comm.scheme == sfb::Scheme::kAuto && cfg.sfb.staleness == 0 && !cfg.optimizer.lr_auto;
    const bool evaluates = job.rank() == 0 || sharded || may_shard;
    const sfb::io::LoadRequest req{part, s.workers, evaluates, evaluates ? cfg.eval.train_sample : 0};
    sfb::io::data_memory(cfg.data, req).check(available, "loading the data");
    s.data = sfb::io::load_data(cfg.data, cfg.job.seed, req);
    s.model = sfb::models::make_model(cfg, s.data.train, s.data.total_train, part, s.workers);
    const auto& d = s.data.train;
    const int64_t stored = sfb::stored_rows(s.model->layout(), s.model->rows(), s.model->cols());
    SFB_CHECK(cfg.comm.scheme != sfb::Scheme::kFms || cfg.fms.servers <= stored,
              "fms.servers = {} is more than the {} rows of W the servers shard ({} layout): a server would hold "
              "none; use at most {} servers",
              cfg.fms.servers, stored, sfb::layout_name(s.model->layout()), stored);
    s.v_floats = d.sparse ? static_cast<double>(d.csr.nonZeros()) / static_cast<double>(std::max<int64_t>(d.n, 1)) + 1
                          : static_cast<double>(s.model->cols());
    s.process_bytes = static_cast<double>(std::max<int64_t>(0, sfb::current_rss_bytes()));
    if (sharded) check_shardable(cfg, *s.model, s.workers);
    s.shardable = may_shard && sfb::runtime::sharded_refusal(cfg, *s.model).empty() && s.model->rows() >= s.workers;
    s.memory = rank_memory(cfg, job.rank(), s);
    if (s.shardable && !s.memory.fits(available)) {
      // W does not fit replicated here: "auto" shards it (every rank agrees after the set-up), if that fits.
      s.fits_replicated = false;
      sfb::Config as_sharded = cfg;
      as_sharded.comm.scheme = sfb::Scheme::kSharded;
      rank_memory(as_sharded, job.rank(), s)
          .check(available,
                 "training this model with W's rows sharded (comm.scheme = \"auto\": W does not fit "
                 "replicated)");
    } else {
      s.memory.check(available, s.server ? "serving this model's shard" : "training this model");
    }
    if (!s.server && !cfg.model.init.empty()) {
      check_model_file("model.init =", cfg.model.init, *s.model, {}, &s.init_seal);
      s.init_W = true;
    }
  });
}

// Throws DataError naming the file when a checkpoint with header `ckpt` cannot continue this job.
void check_resumable(const sfb::Config& cfg, const std::string& path, const sfb::io::CheckpointInfo& ckpt,
                     const sfb::api::Model* model) {
  SFB_CHECK_DATA(ckpt.fingerprint == cfg.model_fingerprint(),
                 "{}: the checkpoint was written by a job with other model, data or optimizer settings (fingerprint "
                 "{:016x}, this config {:016x}); resume with the config that wrote it",
                 path, ckpt.fingerprint, cfg.model_fingerprint());
  SFB_CHECK_DATA(
      ckpt.clock<cfg.stop.max_clocks,
                 "{}: the checkpoint is at clock {} and this run stops at clock {} ({}): nothing left to train; "
                 "raise it",
                 path, ckpt.clock, cfg.stop.max_clocks, cfg.stop.max_epochs> 0
          ? fmt::format("stop.max_epochs = {}", cfg.stop.max_epochs)
          : std::string("stop.max_clocks"));
  SFB_CHECK_DATA(ckpt.rows == model->rows() && ckpt.cols == model->cols(),
                 "{}: the checkpoint's W is {} x {} but model \"{}\" on this data is {} x {}", path, ckpt.rows,
                 ckpt.cols, model->name(), model->rows(), model->cols());
}

// Rank 0: reads the whole checkpoint once without keeping it (header, CRC, every value finite) and
// seals it (`seal`: what a later read must find). Its header's fields are judged only once the CRC
// has passed: a corrupted header is reported as corruption, not by a field it changed.
sfb::io::CheckpointInfo verify_checkpoint(const sfb::Config& cfg, const std::string& path, const sfb::api::Model* model,
                                          sfb::FileSeal& seal) {
  std::string non_finite;  // the first block with a non-finite value, reported after the CRC
  const auto info = sfb::io::read_checkpoint(
      path,
      [&](const sfb::io::CheckpointInfo& i) -> sfb::RowSink {
        return [&non_finite, cols = i.cols](int64_t r0, int64_t n, const float* data) {
          if (non_finite.empty() && !Eigen::Map<const Eigen::ArrayXf>(data, n * cols).allFinite())
            non_finite = fmt::format("rows {}..{}", r0, r0 + n - 1);
        };
      },
      sfb::kRowBlockBytes, &seal);
  check_resumable(cfg, path, info, model);
  SFB_CHECK_DATA(non_finite.empty(),
                 "{}: the checkpoint's W has non-finite values ({}; its CRC is valid: it was written so); resume "
                 "from an earlier checkpoint",
                 path, non_finite);
  return info;
}

// --resume: rank 0 reads and checks the checkpoint, every rank learns its clock from rank 0 (the file
// need only exist where rank 0 runs); W itself follows in row blocks when the worker starts
// (broadcast_checkpoint). False when it is unusable.
bool load_checkpoint(Job& job, const sfb::api::Model* model, sfb::io::CheckpointInfo& info, sfb::FileSeal& seal) {
  const auto& path = job.resume_path;
  const bool ok = job.all_ok("agreeing on the checkpoint", [&] {
    if (job.rank() == 0) info = verify_checkpoint(job.cfg, path, model, seal);
  });
  if (!ok) return false;
  sfb::ByteWriter w;
  w.put<int64_t>(info.clock);
  w.put<int32_t>(info.ranks);
  w.put<double>(info.lr);
  const sfb::Bytes head = sfb::comm::broadcast_bytes(*job.transport, 0, w.bytes());
  sfb::ByteReader r(head, "checkpoint broadcast", sfb::ByteReader::Source::kMessage);
  info.clock = r.get<int64_t>("clock");
  info.ranks = r.get<int32_t>("ranks");
  info.lr = r.get<double>("lr");
  spdlog::info("resuming from {} at clock {} (written by {} ranks)", path, info.clock, info.ranks);
  return true;
}

// The checkpoint's W into every rank's replica, in row blocks of 1 MiB: rank 0 streams the file and
// broadcasts each block (collective; the blocks follow rows_per_block(D, 1 MiB) on every rank). A
// barrier every 8 blocks keeps rank 0 from running ahead: no rank ever holds more than 8 blocks
// that its replica has not taken yet.
void broadcast_checkpoint(Job& job, const std::string& path, const sfb::FileSeal& seal, int64_t J, int64_t D,
                          const sfb::RowSink& sink) {
  constexpr int64_t kBlockBytes = int64_t{1} << 20;
  int64_t blocks = 0;
  const auto pace = [&job, &blocks] {
    if (++blocks % 8 == 0) job.transport->barrier();
  };
  if (job.rank() == 0) {
    sfb::FileSeal verified = seal;  // a file that is not the one verified is refused before its first block
    sfb::io::read_checkpoint(
        path,
        [&](const sfb::io::CheckpointInfo& info) -> sfb::RowSink {
          SFB_ENFORCE(info.rows == J && info.cols == D, "{}: a sealed checkpoint of {} x {} for W {} x {}", path,
                      info.rows, info.cols, J, D);
          return [&](int64_t r0, int64_t n, const float* data) {
            sink(r0, n, data);
            sfb::comm::broadcast_bytes(*job.transport, 0, std::as_bytes(std::span(data, static_cast<size_t>(n * D))));
            pace();
          };
        },
        kBlockBytes, &verified);
    return;
  }
  const int64_t per = std::min(J, sfb::rows_per_block(D, kBlockBytes));
  for (int64_t r0 = 0; r0 < J; r0 += per) {
    const int64_t n = std::min(per, J - r0);
    const sfb::Bytes block = sfb::comm::broadcast_bytes(*job.transport, 0, {});
    SFB_CHECK_DATA(block.size() == static_cast<size_t>(n * D) * sizeof(float),
                   "{}: rank 0 broadcast {} bytes of rows {}..{}, expected {}", path, block.size(), r0, r0 + n - 1,
                   n * D * 4);
    sink(r0, n, reinterpret_cast<const float*>(block.data()));
    pace();
  }
}

// Every rank's peak RSS so far and its estimate, in rank order (collective: workers and servers).
RankMemory gather_memory(Job& job, const Setup& s) {
  RankMemory m;
  m.peak_rss = sfb::comm::allgather_i64(*job.transport, sfb::peak_rss_bytes());
  m.estimate = sfb::comm::allgather_i64(*job.transport, static_cast<int64_t>(s.memory.total()));
  m.before_training = sfb::comm::allgather_i64(*job.transport, static_cast<int64_t>(s.memory.held()));
  return m;
}

// The parameter servers report nothing themselves; they learn whether rank 0 saw divergence.
int run_server(Job& job, const Setup& s) {
  auto& model = *s.model;
  const sfb::Layout l = model.layout();
  sfb::baselines::FmsServer fms(
      job.cfg.fms, job.cfg.runtime.peer_timeout_s, *job.transport, sfb::stored_rows(l, model.rows(), model.cols()),
      sfb::stored_cols(l, model.rows(), model.cols()), sfb::runtime::model_prox(job.cfg, model));
  const auto st = fms.run();
  spdlog::info("parameter server done: {} clocks, sent {:.2f} MB, received {:.2f} MB, {:.2f} s applying", st.clocks,
               st.traffic.bytes_sent / 1e6, st.traffic.bytes_received / 1e6, st.apply_s);
  gather_memory(job, s);
  job.transport.reset();
  auto guard = job.waiting_on_peers("learning how the job ended");
  return job.mpi.broadcast(0, 0);  // rank 0's exit code
}

// What the model file keeps besides W: data.bias, and for a classifier (W's rows the classes) the
// training file's label of each class, so predictions speak the file's labels.
sfb::io::ModelMeta model_meta(const sfb::Config& cfg, const Setup& s) {
  sfb::io::ModelMeta meta;
  meta.bias = cfg.data.bias;
  const bool classifier = is_classifier(cfg);
  if (classifier && static_cast<int64_t>(s.data.labels.size()) == s.model->rows()) meta.labels = s.data.labels;
  return meta;
}

// Every rank read the same data (it inferred the same features and label map from its copy of
// data.train): false, rank 0 having said which differ, when not.
bool agree_on_data(Job& job, const Setup& s) {
  uint64_t h = sfb::fnv1a64(std::as_bytes(std::span(s.data.labels)));
  const int64_t shape[2] = {s.model->rows(), s.model->cols()};
  h = sfb::fnv1a64(std::as_bytes(std::span(shape)), h);
  try {
    sfb::comm::check_values_equal(job.mpi.allgather(static_cast<int64_t>(h)),
                                  "the data's shape and label map (every rank must read the same data.train)");
  } catch (const sfb::InvalidArgument& e) {
    if (job.rank() == 0) fmt::print(stderr, "sfbd: error: {}\n", e.what());
    return false;
  }
  return true;
}

// Rank 0's outputs at the end; false when one could not be written (full disk, I/O error): each
// file is written to a temporary and renamed, so a failure leaves the previous file (or none),
// never a truncated one, and the checkpoint stays whole.
// Rank 0: runtime/still_improving.h's warning for a run that stopped at its limit while still
// improving (logged), or "".
std::string still_improving_warning(const sfb::Config& cfg, const Setup& s, const sfb::runtime::WorkerResult& r) {
  const bool gradient = s.model->update_rule() == sfb::api::UpdateRule::kGradientStep;
  std::string improving = sfb::runtime::still_improving(cfg.stop, r.stop_reason, r.evals, r.start_clock, gradient);
  if (!improving.empty()) spdlog::warn("{}", improving);
  return improving;
}

// `sharded`: the sharded scheme's run, whose model file is written already (collectively): whether
// it was, and the theory's bytes.
struct ShardedOutputs {
  bool model_written = true;
  double theory_bytes = 0;
};

bool write_outputs(const Job& job, const Setup& s, const sfb::runtime::WorkerResult& result, RankMemory memory,
                   double cpu_stolen_share, std::string still_improving,
                   std::optional<ShardedOutputs> sharded = std::nullopt) {
  const auto& cfg = job.cfg;
  bool ok = !sharded || sharded->model_written;
  const auto attempt = [&](const std::string& what, const std::function<void()>& write) {
    ok = write_output(cfg, what, write) && ok;
  };
  if (const auto path = cfg.output.path(cfg.output.model); !path.empty() && !sharded) {
    // A model file is never written with weights that are not finite or that the monitor judged
    // bad (diverged, or replicas that went separate ways): the log says so.
    if (!result.weights->all_finite_unlocked())
      spdlog::error("{} not written: the final W has non-finite values (the run diverged)", path);
    else if (sfb::is_failure(result.stop_reason))
      spdlog::error("{} not written: the run stopped with reason \"{}\"", path, sfb::to_string(result.stop_reason));
    else
      attempt(path, [&] { sfb::io::write_model(path, result.weights->file_order_unlocked(), model_meta(cfg, s)); });
  }
  SfbRun run{cfg,
             result,
             s.model->name(),
             s.workers,
             s.model->rows(),
             s.model->cols(),
             s.model->sparse_v(),
             s.data.eval_sample.n,
             s.model->layout(),
             s.auto_choice,
             s.lr_search,
             std::move(memory),
             cpu_stolen_share,
             std::move(still_improving)};
  if (sharded) {
    run.sharded = true;
    run.sharded_theory_bytes = sharded->theory_bytes;
  }
  if (const auto path = cfg.output.path(cfg.output.summary); !path.empty())
    attempt(path, [&] { sfb::write_file_atomic(path, sfb::to_document(sfb_summary(run))); });
  print_sfb_table(run);
  return ok;
}

}  // namespace

bool check_sfb(Job& job) {
  Setup s;
  if (!set_up(job, s)) return false;
  if (job.rank() == 0) fmt::print("memory on rank 0: {}\n", s.memory.describe());
  if (job.resume_path.empty()) return true;
  // The run's last clock, as training computes it (stop.max_epochs may set it).
  if (!s.server)
    job.decide("stop.max_epochs over the training rows of every rank", [&](sfb::Config& c) {
      c.stop.max_clocks = c.stop.clock_limit(s.data.total_train, s.workers * c.optimizer.minibatch);
    });
  return job.all_ok("checking the checkpoint", [&] {
    if (s.server || job.rank() != 0) return;
    verify_checkpoint(job.cfg, job.resume_path, s.model.get(), s.ckpt_seal);
  });
}

// --evaluate under comm.scheme = "sharded" (mpirun -np P): every rank loads the data and keeps its
// block of W's rows, which rank 0 reads from the file and sends to their owners (no rank holds W);
// the objectives and the accuracy are reduced across the blocks as a run's evaluations are.
int evaluate_sharded(Job& job, const std::string& path) {
  const auto& cfg = job.cfg;
  sfb::io::LoadedData data;
  sfb::models::ModelPtr model;
  const int P = job.ranks();
  const bool ok = job.all_ok("agreeing that the model file and data loaded", [&] {
    const sfb::io::LoadRequest req{0, 1, true, cfg.eval.train_sample};
    sfb::io::data_memory(cfg.data, req).check(sfb::available_memory_bytes(job.mpi.ranks_on_host()), "loading the data");
    data = sfb::io::load_data(cfg.data, cfg.job.seed, req);
    model = sfb::models::make_model(cfg, data.train, data.total_train, 0, 1);
    check_shardable(cfg, *model, P);
    if (job.rank() == 0) check_model_file("--evaluate", path, *model);
  });
  if (!ok) return kExitBadInput;
  sfb::runtime::WorkerStart start;
  start.load = [&path](const sfb::RowSink& sink) {
    sfb::io::read_model(path, [&sink](int64_t, int64_t) { return sink; });
  };
  sfb::runtime::ShardedWorker w(cfg, *job.transport, data.train, data.eval_sample, &data.test, *model, start);
  sfb::Json j = {{"model_file", path}, {"model", model->name()}, {"scheme", "sharded"},       {"ranks", P},
                 {"J", model->rows()}, {"D", model->cols()},     {"train_rows", data.train.n}};
  j["train_objective"] = sfb::sig(w.objective(data.train, 0), 8);
  j["objective_rows"] = data.eval_sample.n;
  j["sample_objective"] = sfb::sig(w.objective(data.eval_sample, 0), 8);
  j["test_rows"] = data.test.n;
  if (data.test.n > 0) {
    j["test_objective"] = sfb::sig(w.objective(data.test, 0), 8);
    const double acc = w.accuracy(data.test);
    j["test_accuracy"] = acc < 0 ? sfb::Json(nullptr) : sfb::Json(sfb::sig(acc, 8));
  }
  j["metrics"] = sfb::Json::object();  // the models' extra metrics read W whole
  if (job.rank() == 0) fmt::print("{}", sfb::to_document(j));
  return kExitOk;
}

namespace {

// --evaluate's per-class report of a classifier on the test set (predict.h), with the confusion
// matrix as CSV text (--evaluate writes no file). `test` is the loaded test set, or null: data.test
// is read with the model file's label map. `data_labels`: the label map the data gave, to be the
// file's.
sfb::Json class_report(const sfb::Config& cfg, const std::string& path, const sfb::io::Dataset* test,
                       const std::vector<int64_t>& data_labels) {
  const Classifier c = read_classifier(path);
  SFB_CHECK_DATA(c.meta.labels.empty() || data_labels.empty() || c.meta.labels == data_labels,
                 "--evaluate {}: the model file's {} labels ({} .. {}) are not the {} labels of data.train {}", path,
                 c.meta.labels.size(), c.meta.labels.front(), c.meta.labels.back(), data_labels.size(), cfg.data.train);
  const sfb::ClassReport r = test ? score_rows(c, *test, nullptr, false)
                                  : score_libsvm(c, cfg.data.test, cfg.data.max_test_samples, nullptr, false);
  sfb::Json j = class_report_json(r, c.labels);
  j["confusion_csv"] = r.confusion_csv(c.labels);
  return j;
}

// --evaluate without data.train (libsvm): the model file's W and label map on data.test alone.
int evaluate_test_only(Job& job, const std::string& path) {
  const auto& cfg = job.cfg;
  sfb::Json j;
  const bool ok = job.all_ok("evaluating the model file on data.test", [&] {
    if (job.rank() != 0) return;
    SFB_CHECK(cfg.data.format == sfb::DataFormat::kLibsvm && !cfg.data.test.empty(),
              "--evaluate without data.train needs data.format = \"libsvm\" and data.test");
    const sfb::io::ModelMeta meta = sfb::io::read_model_meta(path);
    j = {{"model_file", path}, {"J", meta.rows}, {"D", meta.cols}, {"format_version", meta.version}};
    j["classes"] = class_report(cfg, path, nullptr, {});
    j["test_rows"] = j["classes"]["rows"];
    j["test_accuracy"] = j["classes"]["accuracy"];
    j["test_log_loss"] = j["classes"]["log_loss"];
  });
  if (!ok) return kExitBadInput;
  if (job.rank() == 0) fmt::print("{}", sfb::to_document(j));
  return kExitOk;
}

}  // namespace

int evaluate_sfb(Job& job, const std::string& path) {
  const auto& cfg = job.cfg;
  if (cfg.comm.scheme == sfb::Scheme::kSharded) return evaluate_sharded(job, path);
  if (cfg.data.format == sfb::DataFormat::kLibsvm && cfg.data.train.empty()) return evaluate_test_only(job, path);
  sfb::io::LoadedData data;
  sfb::models::ModelPtr model;
  sfb::Matrix stored;  // W in the model's layout, read straight from the file (no second copy)
  sfb::Json report;    // a classifier's per-class report on the test set
  // Rank 0 evaluates on the whole training and test sets; other ranks (under mpirun) wait.
  const bool ok = job.all_ok("agreeing that the model file and data loaded", [&] {
    if (job.rank() != 0) return;
    // Also the objective's sample (eval.train_sample): the value a run reports for this W.
    const sfb::io::LoadRequest req{0, 1, true, cfg.eval.train_sample};
    sfb::io::data_memory(cfg.data, req).check(sfb::available_memory_bytes(1), "loading the data");
    data = sfb::io::load_data(cfg.data, cfg.job.seed, req);
    model = sfb::models::make_model(cfg, data.train, data.total_train, 0, 1);
    // One pass: checked and read into the model's layout together.
    stored.resize(sfb::stored_rows(model->layout(), model->rows(), model->cols()),
                  sfb::stored_cols(model->layout(), model->rows(), model->cols()));
    check_model_file("--evaluate", path, *model, sfb::row_sink(stored, model->layout()));
    if (is_classifier(cfg) && data.test.n > 0) report = class_report(cfg, path, &data.test, data.labels);
  });
  if (!ok) return kExitBadInput;
  if (job.rank() != 0) return kExitOk;
  const bool test = data.test.n > 0;
  // The file holds W row-major; the model reads it in its own layout, as in training.
  const sfb::api::Weights Wl{stored, 1.0f, model->layout()};
  sfb::Json j = {{"model_file", path},
                 {"model", model->name()},
                 {"layout", std::string(sfb::layout_name(model->layout()))},
                 {"J", model->rows()},
                 {"D", model->cols()},
                 {"train_rows", data.train.n},
                 {"train_objective", sfb::sig(model->objective(Wl, data.train, 0), 8)},
                 {"objective_rows", data.eval_sample.n},
                 {"sample_objective", sfb::sig(model->objective(Wl, data.eval_sample, 0), 8)},
                 {"test_rows", data.test.n}};
  if (test) {
    j["test_objective"] = sfb::sig(model->objective(Wl, data.test, 0), 8);
    const double acc = model->accuracy(Wl, data.test);
    j["test_accuracy"] = acc < 0 ? sfb::Json(nullptr) : sfb::Json(sfb::sig(acc, 8));
  }
  sfb::Json metrics = sfb::Json::object();
  for (const auto& [k, v] : model->metrics(Wl, data.train, 0, test ? &data.test : nullptr)) metrics[k] = sfb::sig(v, 8);
  j["metrics"] = metrics;
  if (!report.is_null()) {
    j["test_log_loss"] = report["log_loss"];
    j["classes"] = report;
  }
  fmt::print("{}", sfb::to_document(j));
  return kExitOk;
}

// sfb.reconcile_every = 0 under a reconciled partial broadcast: the period at which the
// reconciliation costs about 10% of the factor bytes, from the mean v non-zeros over every rank's
// partition (one all-gather), so every worker agrees on it. Written into the resolved config.
void resolve_reconcile_every(Job& job, const Setup& s) {
  const auto& cfg = job.cfg;
  const auto& m = *s.model;
  if (!sfb::runtime::reconcile_mode(cfg) || cfg.sfb.reconcile_every > 0) return;
  const auto& d = s.data.train;
  const int64_t nnz = d.sparse ? static_cast<int64_t>(d.csr.nonZeros()) : d.n * d.dim;
  int64_t all_nnz = 0, all_rows = 0;
  for (int64_t v : sfb::comm::allgather_i64(*job.transport, nnz)) all_nnz += v;
  for (int64_t v : sfb::comm::allgather_i64(*job.transport, d.n)) all_rows += v;
  const int q = sfb::runtime::make_topology(cfg, s.workers).receivers_per_clock();
  // v has the data row's non-zeros (and the bias); the model's own D bounds it.
  const double v_nonzeros = static_cast<double>(all_nnz) / static_cast<double>(std::max<int64_t>(all_rows, 1));
  job.decide("sfb.reconcile_every = 0: from the partitions' non-zeros (runtime::auto_reconcile_every)",
             [&](sfb::Config& c) {
               c.sfb.reconcile_every = sfb::runtime::auto_reconcile_every(
                   s.workers, q, c.optimizer.minibatch, m.rows(), m.cols(), m.sparse_v() ? v_nonzeros : m.cols());
             });
}

// The schemes comm.scheme = "auto" chooses from: those that train on every rank of the job. FMS
// is predicted beside them (its servers are ranks set aside at launch: mpirun -np P+S).
std::vector<sfb::predict::Scheme> auto_candidates(const sfb::Config& cfg, bool sharded) {
  using sfb::predict::Scheme;
  std::vector<Scheme> c{Scheme::sfb_full(), Scheme::halton(static_cast<int>(cfg.sfb.halton_q)), Scheme::allreduce()};
  if (sharded) c.push_back(Scheme::sharded());
  return c;
}

// The job's scheme profile: measured on every rank (on a model instance of its own), or the recorded
// one of comm.auto_profile (rank 0 reads it; every rank gets its bytes). Throws on bad input.
sfb::predict::SchemeProfile job_profile(Job& job, const Setup& s, bool measure) {
  const auto& cfg = job.cfg;
  if (!measure) {
    // Rank 0 read and checked the file (recorded_profile); every rank parses its bytes.
    const std::string text(reinterpret_cast<const char*>(s.recorded_profile.data()), s.recorded_profile.size());
    const std::string name = "comm.auto_profile = " + cfg.comm.auto_profile;
    return sfb::predict::profile_from_json(sfb::parse_json(text, name), name);
  }
  // A worker's model instance of its own (compute_sf is called on it); a server serves its shard of
  // W to the FMS engine (profiler/scheme_profiler.h) with the one it set up with.
  auto model =
      s.server ? nullptr : sfb::models::make_model(cfg, s.data.train, s.data.total_train, job.rank(), s.workers);
  sfb::profiler::ProfileRequest req;
  req.cfg = &cfg;
  req.transport = job.transport.get();
  req.model = s.server ? s.model.get() : model.get();
  req.train = &s.data.train;
  req.objective_rows = &s.data.eval_sample;
  req.test = &s.data.test;
  req.workers = s.workers;
  req.ranks_on_host = job.mpi.ranks_on_host();
  const sfb::CpuBudget budget = sfb::cpu_budget();
  req.cores = budget.cores;
  req.cpu_group = budget.group;
  req.allreduce = allreduce_factory(cfg);
  // Its waits on peers are bounded by the peer timeout, its own work by the budget (a rank may wait
  // out another's measurement: FMS's servers wait for the workers' own): the watchdog takes both.
  auto guard = job.waiting_on_peers("profiling the schemes", req.budget_s);
  return sfb::profiler::measure_scheme_profile(req);
}

// FMS with fms.servers beside the candidates: predicted, though auto cannot choose it (its servers
// are ranks set aside at launch).
sfb::predict::Prediction fms_prediction(const sfb::Config& cfg, const sfb::predict::SchemeProfile& p, int nodes,
                                        int per_host) {
  return sfb::predict::predict(p, sfb::predict::Scheme::fms(static_cast<int>(cfg.fms.servers)),
                               {nodes, p.link, per_host, true});
}

// Every prediction (the candidates fastest first, then FMS) as JSON and in the log.
sfb::Json predictions_json(const std::vector<sfb::predict::Prediction>& ranked, const sfb::predict::Prediction& fms) {
  sfb::Json preds = sfb::Json::array();
  std::vector<const sfb::predict::Prediction*> all;
  for (const auto& r : ranked) all.push_back(&r);
  all.push_back(&fms);
  for (const auto* r : all) {
    spdlog::info(
        "predicted {:>10}: {:.4f} s/clock (compute {:.4f}, network {:.4f}, update {:.4f}, engine {:.4f}), {:.2f} "
        "MB/clock{}",
        r->label(), r->clock_s, r->compute_s, r->comm_s, r->update_s, r->engine_s, r->bytes_per_clock / 1e6,
        r == &fms ? fmt::format(" (not a candidate: needs {} more ranks at launch)", fms.servers) : "");
    preds.push_back(sfb::predict::to_json(*r));
  }
  return preds;
}

// comm.scheme = "auto" where W does not fit replicated on some rank (set_up found that the sharded
// scheme can train the job and fits): the sharded scheme on every rank, without a profile.
void shard_what_does_not_fit(Job& job, Setup& s) {
  if (job.cfg.comm.scheme != sfb::Scheme::kAuto || !s.shardable) return;
  const auto fits = job.mpi.allgather(static_cast<int64_t>(s.fits_replicated));
  std::vector<int> short_of;
  for (size_t r = 0; r < fits.size(); ++r)
    if (!fits[r]) short_of.push_back(static_cast<int>(r));
  if (short_of.empty()) return;
  const double w_gib = 4.0 * static_cast<double>(s.model->rows()) * static_cast<double>(s.model->cols()) / (1 << 30);
  const std::string why = fmt::format("W ({:.3g} GiB) does not fit replicated on rank{} {} (their memory estimates)",
                                      w_gib, short_of.size() == 1 ? "" : "s", fmt::join(short_of, ", "));
  job.decide("comm.scheme = \"auto\": " + why, [](sfb::Config& c) { c.comm.scheme = sfb::Scheme::kSharded; });
  s.memory = rank_memory(job.cfg, job.rank(), s);
  s.auto_choice = {{"chosen", "sharded"}, {"reason", why}};
  if (job.rank() == 0) {
    spdlog::info("comm.scheme = \"auto\": sharded: {}", why);
    if (job.cfg.comm.transport == sfb::TransportKind::kMpi)
      spdlog::warn(
          "the sharded scheme runs over comm.transport = \"mpi\" here, which polls; comm.transport = "
          "\"tcp\" is faster for it (design.md \"The sharded scheme\")");
  }
}

// comm.scheme = "auto": profiles (or reads comm.auto_profile), predicts every candidate and sets
// comm.scheme and sfb.broadcast to the fastest. False (every rank) on bad input.
bool resolve_auto_scheme(Job& job, Setup& s) {
  const auto& cfg = job.cfg;
  if (cfg.comm.scheme != sfb::Scheme::kAuto) return true;
  const bool measure = cfg.comm.auto_profile.empty();
  if (!measure) {
    if (!job.all_ok("reading comm.auto_profile", [&] {
          if (job.rank() == 0) s.recorded_profile = read_recorded_profile(cfg, *s.model);
        }))
      return false;
    s.recorded_profile = sfb::comm::broadcast_bytes(*job.transport, 0, s.recorded_profile);
  }
  sfb::predict::SchemeProfile p;
  if (!job.all_ok("profiling the schemes", [&] { p = job_profile(job, s, measure); })) return false;
  // A measured profile knows how many ranks share a machine's cores; for a recorded one, MPI's ranks
  // on this host.
  const int per_host = cfg.comm.auto_profile.empty() ? p.ranks_on_host : job.mpi.ranks_on_host();
  // The sharded scheme is a candidate where it can train the job, over TCP: MPI's transport polls,
  // and the scheme's one thread waits on two all-gathers a clock (design.md "The sharded scheme").
  const bool mpi = cfg.comm.transport == sfb::TransportKind::kMpi;
  if (s.shardable && mpi && job.rank() == 0)
    spdlog::info(
        "comm.scheme = \"auto\": the sharded scheme is not a candidate over comm.transport = \"mpi\" (it "
        "polls); comm.transport = \"tcp\" makes it one");
  const auto ranked = sfb::predict::rank_schemes(p, auto_candidates(cfg, s.shardable && !mpi), s.workers, per_host);
  const auto fms = fms_prediction(cfg, p, s.workers, per_host);
  const auto preds = predictions_json(ranked, fms);
  const std::string best = ranked.front().label();
  job.decide("comm.scheme = \"auto\": " + best + ", predicted fastest",
             [&](sfb::Config& c) { ranked.front().which.apply_to(c, s.workers); });
  s.memory = rank_memory(cfg, job.rank(), s);
  spdlog::info("comm.scheme = \"auto\": {} (predicted {:.4f} s/clock, {:.2f}x the next, {})", best, ranked[0].clock_s,
               ranked[1].clock_s / std::max(ranked[0].clock_s, 1e-12),
               cfg.comm.auto_profile.empty() ? "profile measured on these ranks" : "profile " + cfg.comm.auto_profile);
  s.auto_choice = {{"chosen", best},
                   {"profile_source", cfg.comm.auto_profile.empty() ? "measured" : cfg.comm.auto_profile},
                   {"predictions", preds},
                   {"profile", sfb::predict::to_json(p)}};
  // FMS needs server ranks set aside at launch, so auto cannot switch to it; when it is predicted
  // faster, say which launch would win.
  if (job.rank() == 0 && fms.clock_s < ranked[0].clock_s) {
    const int S = static_cast<int>(cfg.fms.servers);
    const std::string launch =
        fmt::format("mpirun -np {} sfbd ... --set comm.scheme=fms --set fms.servers={}", s.workers + S, S);
    spdlog::warn(
        "FMS with {} server{} is predicted faster than {} ({:.4f} against {:.4f} s/clock): it needs its "
        "servers at launch: {}",
        S, S == 1 ? "" : "s", best, fms.clock_s, ranked[0].clock_s, launch);
    s.auto_choice["faster_launch"] = launch;
  }
  return true;
}

// A profile taken while the hypervisor stole this share of the CPU time the machine wanted or more
// says so: on a netns cluster of 0.125-core hosts a profile under 18% (7.6% of all the CPU time,
// the machine 59% idle) predicted its own hosts' clocks 23-32% slow (runs under 1-3% of all the
// time; docs/compare-log.md "How repeatable the testbed is"). On that machine, quiet, a few percent.
constexpr double kStealWarnShare = 0.10;

int profile_sfb(Job& job, const std::string& path, bool partial) {
  Setup s;
  if (!set_up(job, s)) return kExitBadInput;
  sfb::predict::SchemeProfile p;
  const sfb::MachineWatch watch(job.rank() == 0);  // rank 0 writes the profile
  if (!job.all_ok("profiling the schemes", [&] { p = job_profile(job, s, true); })) return job.failure_exit();
  // Every worker has the same profile: all of them fail alike (a server's is empty).
  if (!p.skipped.empty() && !partial) {
    if (job.rank() == 0)
      spdlog::error(
          "--profile {}: the profile is incomplete: {} did not fit in the profiler's time budget (the machine was "
          "busy, or the job's clocks are long), and its predictions would stand on the pieces alone; nothing "
          "written. Profile again when the machine is quieter or on a smaller stand-in job, or pass "
          "--partial-profile to write it as it is (its \"skipped\" names what is missing)",
          path, fmt::join(p.skipped, ", "));
    return kExitFailed;
  }
  if (job.rank() != 0) return kExitOk;
  if (!p.skipped.empty())
    spdlog::warn("--profile {}: a partial profile (--partial-profile): not measured: {}", path,
                 fmt::join(p.skipped, ", "));
  p.cpu_stolen_share = watch.stolen_share();
  if (p.cpu_stolen_share >= kStealWarnShare)
    spdlog::warn(
        "the hypervisor gave {:.1f}% of the CPU time this machine wanted to other guests while it profiled: "
        "the profile's times measure the neighbours too; profile again when the machine is quieter "
        "(cpu_stolen_share in {})",
        100.0 * p.cpu_stolen_share, path);
  const auto ranked = sfb::predict::rank_schemes(p, auto_candidates(job.cfg, s.shardable), p.workers, p.ranks_on_host);
  sfb::Json j = sfb::predict::to_json(p);
  j["predictions"] = predictions_json(ranked, fms_prediction(job.cfg, p, p.workers, p.ranks_on_host));
  sfb::write_file_atomic(path, sfb::to_document(j));
  fmt::print("{}: profile of {} on {} ranks written; predicted fastest: {} ({:.4f} s/clock)\n", path, s.model->name(),
             s.workers, ranked[0].label(), ranked[0].clock_s);
  return kExitOk;
}

// One candidate of the learning-rate search: `clocks` clocks from the start W with the optimizer
// `opt` (lr_policy.h) and a model instance of its own, as an unwatched run
// (runtime::unwatched_run: no evaluation between its start and its end, whose drift sketches would
// outlive it on the transport), rank 0 training on the rows `held` leaves it; rank 0's monitor
// evaluates the held-out rows' objective and accuracy at both ends, and every rank learns them.
std::pair<sfb::LrScore, sfb::LrScore> lr_trial(Job& job, const Setup& s, const sfb::runtime::WorkerStart& start,
                                               const LrHoldout& held, const sfb::OptimizerConfig& opt, int64_t clocks) {
  sfb::Config c = sfb::runtime::unwatched_run(job.cfg, start.clock, clocks);
  c.optimizer = opt;
  sfb::runtime::WorkerStart from = start;
  from.objective_rows = &held.rows;  // rank 0 (empty elsewhere, and where its partition is tiny: all its rows)
  from.train_rows = held.train_rows;
  auto model = sfb::models::make_model(c, s.data.train, s.data.total_train, job.rank(), s.workers);
  auto exchange = sfb::baselines::make_exchange(c, model->has_prox(), allreduce_factory(c));
  const sfb::io::Dataset* test = held.rows.n > 0 ? &held.rows : nullptr;
  sfb::runtime::Worker worker(c, *job.transport, s.data.train, test, *model, {}, from, exchange.get());
  const auto r = worker.run();
  constexpr double kNone = -std::numeric_limits<double>::infinity();  // ranks other than 0 do not evaluate
  double v[4] = {kNone, kNone, kNone, kNone};  // objective and accuracy at the start, then at the end
  if (job.rank() == 0) {
    SFB_ENFORCE(r.evals.size() >= 2 && r.evals.back().clock == c.stop.max_clocks,
                "the learning-rate trial evaluated {} times", r.evals.size());
    const auto& a = r.evals.front();
    const auto& b = r.evals.back();
    v[0] = a.objective, v[1] = a.accuracy;
    v[2] = std::isfinite(b.objective) ? b.objective : std::numeric_limits<double>::infinity(), v[3] = b.accuracy;
  }
  for (double& x : v) x = job.mpi.max(x);  // on the bootstrap's communicator: the transport is the trial's
  return {{v[1], v[0]}, {v[3], v[2]}};
}

// optimizer.lr = "auto" in the sfb mode (lr_search.h): gradient models on the sfb and allreduce
// schemes; each trial is lr_trial. Every rank calls it; the exit code when the job cannot go on.
std::optional<int> resolve_sfb_lr(Job& job, Setup& s, const sfb::runtime::WorkerStart& start) {
  const auto& cfg = job.cfg;
  if (!cfg.optimizer.lr_auto) return std::nullopt;
  if (cfg.comm.scheme == sfb::Scheme::kFms || s.model->update_rule() != sfb::api::UpdateRule::kGradientStep) {
    if (job.rank() == 0)
      spdlog::error(
          "optimizer.lr = \"auto\" searches the step of gradient models on the sfb and allreduce "
          "schemes; {}: set optimizer.lr to a number",
          cfg.comm.scheme == sfb::Scheme::kFms ? "comm.scheme = \"fms\" has server ranks"
                                               : "this model's updates take no step size");
    return kExitBadInput;
  }
  if (reuse_checkpoint_lr(job, s.resumed_lr, job.resume_path, s.lr_search)) return std::nullopt;
  const LrHoldout held = lr_holdout(job, s.data.train);
  return resolve_lr(
      job, start.clock, "clocks", held,
      [&](const sfb::OptimizerConfig& opt, int64_t clocks) { return lr_trial(job, s, start, held, opt, clocks); },
      s.lr_search);
}

// How a training run ends, on every rank: the memory gathered, rank 0's outputs (`sharded`: the
// sharded scheme's, its model file written already) and rank 0's exit code, which every rank returns.
int end_of_run(Job& job, const Setup& s, const sfb::runtime::WorkerResult& result, double steal,
               std::optional<ShardedOutputs> sharded = std::nullopt) {
  auto memory = gather_memory(job, s);
  int code = kExitOk;
  if (job.rank() == 0) {
    const bool written = write_outputs(job, s, result, std::move(memory), steal,
                                       still_improving_warning(job.cfg, s, result), std::move(sharded));
    const bool bad = sfb::is_failure(result.stop_reason);
    code = bad ? kExitDiverged : written ? kExitOk : kExitFailed;
  }
  job.transport.reset();
  auto guard = job.waiting_on_peers("learning how the job ended");
  return job.mpi.broadcast(code, 0);
}

// The sharded scheme's bytes per clock by its formula, from what this run's engine sent (v's mean
// non-zeros when its samples were sparse), evaluated and checkpointed.
double sharded_theory(const sfb::Config& cfg, const sfb::runtime::ShardedWorker& w, const sfb::runtime::WorkerResult& r,
                      int workers, int64_t J, int64_t D) {
  int64_t samples = 0, nonzeros = 0;
  for (const auto& x : r.all) samples += x.pairs_sent, nonzeros += x.v_nonzeros_sent;
  sfb::baselines::ShardedRun run;
  run.J = J, run.D = D;
  run.v_nonzeros = nonzeros > 0 ? static_cast<double>(nonzeros) / static_cast<double>(samples) : -1.0;
  run.width = w.stats_width();
  run.eval_samples = w.eval_samples(), run.eval_chunks = w.eval_chunks();
  run.clocks = r.final_clock - r.start_clock;
  run.evaluations = static_cast<int64_t>(r.evals.size());
  run.checkpoints = w.checkpoints();
  run.stopped_early = r.final_clock < cfg.stop.max_clocks;
  return sfb::baselines::sharded_bytes_per_clock(cfg, workers, run);
}

// comm.scheme = "sharded" (runtime/sharded_worker.h): every rank trains its block of W's rows; the
// model file is written from the blocks (every rank takes part) unless W diverged.
int run_sharded(Job& job, Setup& s, const sfb::runtime::WorkerStart& start) {
  const auto& cfg = job.cfg;
  sfb::runtime::ShardedWorker worker(cfg, *job.transport, s.data.train, s.data.eval_sample, &s.data.test, *s.model,
                                     start);
  const sfb::MachineWatch watch(job.rank() == 0);
  const sfb::runtime::WorkerResult result = worker.run();
  const double steal = watch.stolen_share();
  ShardedOutputs out{true, sharded_theory(cfg, worker, result, s.workers, s.model->rows(), s.model->cols())};
  const bool finite = worker.all_finite(), bad = result.stop_reason == sfb::StopReason::kDiverged;
  if (const auto path = cfg.output.path(cfg.output.model); !path.empty()) {
    if (finite && !bad)
      worker.file_order([&](const sfb::RowSource& src) {
        out.model_written = write_output(cfg, path, [&] { sfb::io::write_model(path, src, model_meta(cfg, s)); });
      });
    else if (job.rank() == 0)
      spdlog::error("{} not written: {}", path,
                    bad ? "the run stopped with reason \"diverged\"" : "the final W has non-finite values");
  }
  return end_of_run(job, s, result, steal, out);
}

// Where W starts: --resume's checkpoint (rank 0 verifies and seals it; its blocks are broadcast when
// the worker starts) or model.init (every worker checked and sealed its copy in set_up). The streams
// read only the files sealed: one that changed in between is refused (FileChanged, exit 2) before
// its first block. False when the checkpoint is unusable (every rank).
bool starting_weights(Job& job, Setup& s, sfb::runtime::WorkerStart& start) {
  sfb::io::CheckpointInfo ckpt;
  const auto& cfg = job.cfg;
  if (!job.resume_path.empty()) {
    // rank 0 is a worker: it has the model
    if (!load_checkpoint(job, s.model.get(), ckpt, s.ckpt_seal)) return false;
    start.clock = ckpt.clock;
    s.resumed_lr = ckpt.lr;
    if (cfg.comm.scheme == sfb::Scheme::kSharded)  // rank 0 streams the file, the engine routes each row to its owner
      start.load = [&job, &s](const sfb::RowSink& sink) {
        sfb::FileSeal verified = s.ckpt_seal;
        sfb::io::read_checkpoint(
            job.resume_path, [&sink](const sfb::io::CheckpointInfo&) { return sink; }, int64_t{4} << 20, &verified);
      };
    else if (!s.server)
      start.load = [&job, &s, J = s.model->rows(), D = s.model->cols()](const sfb::RowSink& sink) {
        broadcast_checkpoint(job, job.resume_path, s.ckpt_seal, J, D, sink);
      };
  } else if (s.init_W) {
    spdlog::info("starting from the W of {} (model.init)", cfg.model.init);
    start.load = [&s, path = cfg.model.init, J = s.model->rows(), D = s.model->cols()](const sfb::RowSink& sink) {
      sfb::FileSeal verified = s.init_seal;
      sfb::io::read_model(
          path,
          [&](int64_t rows, int64_t cols) {
            SFB_ENFORCE(rows == J && cols == D, "{}: a sealed model file of {} x {} for W {} x {}", path, rows, cols, J,
                        D);
            return sink;
          },
          nullptr, &verified);
    };
  }
  return true;
}

// Every rank, just before training: the sealed files are still the ones verified (FileChanged
// otherwise), so a file swapped during set-up is refused by every rank alike, before any block.
void recheck_start_files(const Job& job, const Setup& s) {
  if (!job.resume_path.empty()) {
    if (job.rank() == 0) sfb::check_sealed(job.resume_path, "checkpoint", s.ckpt_seal);
  } else if (s.init_W) {
    sfb::check_sealed(job.cfg.model.init, "model file", s.init_seal);
  }
}

int run_sfb(Job& job) {
  const auto& cfg = job.cfg;
  Setup s;
  if (!set_up(job, s) || !agree_on_data(job, s)) return kExitBadInput;
  // Every worker computes the same limit (total_train counts all ranks' rows); servers run until told.
  job.decide("stop.max_epochs over the training rows of every rank", [&](sfb::Config& c) {
    c.stop.max_clocks = c.stop.clock_limit(s.data.total_train, s.workers * c.optimizer.minibatch);
  });
  if (!s.server)
    spdlog::info(
        "model {}: W is {} x {}; {} training rows ({} on this rank, {} partition), {} features, {} thread(s), {}, "
        "scheme {}",
        s.model->name(), s.model->rows(), s.model->cols(), s.data.total_train, s.data.train.n, cfg.data.partition,
        s.data.train.dim, cfg.runtime.threads, cfg.sfb.consistency_name(),
        cfg.comm.scheme == sfb::Scheme::kSfb
            ? fmt::format("sfb/{} to {} peers a clock", cfg.sfb.broadcast,
                          sfb::runtime::make_topology(cfg, s.workers).receivers_per_clock())
            : std::string(sfb::name(cfg.comm.scheme)));
  sfb::runtime::WorkerStart start;
  shard_what_does_not_fit(job, s);
  if (!resolve_auto_scheme(job, s)) return job.failure_exit();
  const bool sharded = cfg.comm.scheme == sfb::Scheme::kSharded;
  if (!starting_weights(job, s, start)) return kExitBadInput;
  start.objective_rows = &s.data.eval_sample;
  if (const auto code = resolve_sfb_lr(job, s, start)) return *code;
  if (job.find_lr) return report_lr_search(job, s.lr_search);
  resolve_reconcile_every(job, s);
  if (!job.all_ok("agreeing that the files W starts from did not change", [&] { recheck_start_files(job, s); }))
    return job.failure_exit();
  job.record_config();  // every check has passed
  spdlog::info("memory on this rank: {}", s.memory.describe());
  if (sharded) return run_sharded(job, s, start);
  if (s.server) {
    // The checkpoint's blocks go to every rank of the broadcast; a server keeps none of them.
    if (!job.resume_path.empty())
      broadcast_checkpoint(job, job.resume_path, s.ckpt_seal, s.model->rows(), s.model->cols(),
                           [](int64_t, int64_t, const float*) {});
    return run_server(job, s);
  }
  auto exchange = sfb::baselines::make_exchange(cfg, s.model->has_prox(), allreduce_factory(cfg));
  sfb::runtime::Worker worker(cfg, *job.transport, s.data.train, job.rank() == 0 ? &s.data.test : nullptr, *s.model,
                              sfb::runtime::with_study_hooks(cfg.runtime, job.rank()), start, exchange.get());
  const sfb::MachineWatch watch(job.rank() == 0);  // rank 0 writes the summary
  const sfb::runtime::WorkerResult result = worker.run();
  const double steal = watch.stolen_share();
  spdlog::info("done at clock {}: sent {} pairs, received {}, applied {}", result.final_clock, result.self.pairs_sent,
               result.self.pairs_received, result.self.pairs_applied);
  return end_of_run(job, s, result, steal);
}

}  // namespace sfbd
