#pragma once
// The job configuration: a TOML file plus `--set key=value` overrides, validated against one
// schema (config.cc), so every key has a type, a default, a range and a line in
// configs/README.md. Unknown keys, wrong types and bad ranges throw InvalidArgument with
// "<file>:<line>: <key> ..." and the accepted values.
//
// One struct per TOML section, with the section's key names as member names (`data.train` is
// cfg.data.train); components get only the sections they use.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace sfb {

// Clocks and iterations (stop.max_clocks, eval.every, checkpoint.every, a checkpoint's clock) are
// at most 2^53: any sum of a clock and a period, staleness or window then stays far from 2^63, so
// no clock arithmetic can overflow.
inline constexpr int64_t kMaxClock = int64_t{1} << 53;

inline constexpr int64_t kInfiniteStaleness = std::numeric_limits<int64_t>::max();

// The config's choices, parsed once (config.cc's choice_field) into these; each one's names as the
// TOML spells them are its ChoiceNames, in enumerator order: name(Scheme::kFms) is "fms", fmt
// prints the name, and a Json holds the name, never the number (core/json.h).
enum class JobMode { kSfb, kMgwfbp };
enum class Device { kCpu, kCuda };
enum class Scheme { kSfb, kFms, kAllreduce, kAuto, kSharded };
enum class TransportKind { kAuto, kTcp, kMpi };
enum class Collectives { kSfb, kMpi };
enum class Broadcast { kFull, kHalton, kHaltonStatic };
enum class Reconcile { kAuto, kSum, kMean, kOff };

enum class DataFormat { kIdx, kLibsvm, kSynthetic };
enum class Partition { kShuffled, kContiguous };
enum class Snapshot { kAuto, kCopy, kInPlace };
enum class CnnKernels { kOnednn, kReference };
enum class TraceRanks { kRank0, kAll };

template <typename E>
struct ChoiceNames;
template <>
struct ChoiceNames<DataFormat> {
  static constexpr std::string_view names[] = {"idx", "libsvm", "synthetic"};
};
template <>
struct ChoiceNames<Partition> {
  static constexpr std::string_view names[] = {"shuffled", "contiguous"};
};
template <>
struct ChoiceNames<Snapshot> {
  static constexpr std::string_view names[] = {"auto", "copy", "in_place"};
};
template <>
struct ChoiceNames<CnnKernels> {
  static constexpr std::string_view names[] = {"onednn", "reference"};
};
template <>
struct ChoiceNames<TraceRanks> {
  static constexpr std::string_view names[] = {"0", "all"};
};
template <>
struct ChoiceNames<JobMode> {
  static constexpr std::string_view names[] = {"sfb", "mgwfbp"};
};
template <>
struct ChoiceNames<Device> {
  static constexpr std::string_view names[] = {"cpu", "cuda"};
};
template <>
struct ChoiceNames<Scheme> {
  static constexpr std::string_view names[] = {"sfb", "fms", "allreduce", "auto", "sharded"};
};
template <>
struct ChoiceNames<TransportKind> {
  static constexpr std::string_view names[] = {"auto", "tcp", "mpi"};
};
template <>
struct ChoiceNames<Collectives> {
  static constexpr std::string_view names[] = {"sfb", "mpi"};
};
template <>
struct ChoiceNames<Broadcast> {
  static constexpr std::string_view names[] = {"full", "halton", "halton-static"};
};
template <>
struct ChoiceNames<Reconcile> {
  static constexpr std::string_view names[] = {"auto", "sum", "mean", "off"};
};

template <typename E>
concept ConfigChoice = requires {
  ChoiceNames<E>::names;
};

template <ConfigChoice E>
constexpr std::string_view name(E e) {
  return ChoiceNames<E>::names[static_cast<size_t>(e)];
}
// The choice named `text`; nullopt when none is.
template <ConfigChoice E>
constexpr std::optional<E> choice_named(std::string_view text) {
  for (size_t i = 0; i < std::size(ChoiceNames<E>::names); ++i)
    if (ChoiceNames<E>::names[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

struct JobConfig {
  JobMode mode = JobMode::kSfb;
  uint64_t seed = 42;
  Device device = Device::kCpu;  // top-level key `device` (mgwfbp mode)
};

struct DataConfig {
  DataFormat format = DataFormat::kIdx;
  std::string train_images, train_labels, test_images, test_labels;  // idx
  std::string train, test;                                           // libsvm
  int64_t features = 0;                        // libsvm: feature count (required); synthetic: D without bias
  int64_t classes = 0;                         // 0: max label + 1 (idx); required for libsvm and synthetic
  int64_t label_offset = 0;                    // libsvm: subtracted from every label
  bool bias = true;                            // append a constant 1 feature
  Partition partition = Partition::kShuffled;  // io/partition.h
  int64_t max_train_samples = 0;               // 0: all
  int64_t max_test_samples = 0;                // 0: all
  int64_t synthetic_samples = 10000;
  int64_t synthetic_test_samples = 2000;
  double synthetic_density = 1.0;
  double synthetic_noise = 0.1;
  double synthetic_separation = 4.0;
};

struct ModelConfig {
  std::string name = "mlr";
  std::string plugin;           // shared library; when set, name is not used
  std::string init;             // model file to start from ("": the model's own init())
  std::string layout = "auto";  // built-in models' W in memory: auto | row-major | feature-major
  double lambda = 1e-4;         // l2mlr: L2 weight
  double C = 0.0;               // l2mlr: liblinear's C; > 0 sets lambda = 1 / (C n), n the training rows
  std::string solver = "sgd";   // l2mlr: sgd (proximal SGD) | sdca
  double sdca_sigma = 0.0;      // l2mlr sdca: 0 = P * K (safe for P * K simultaneous dual steps)
  int64_t dim = 32;             // dml: rows of L (projection dimension)
  double margin = 1.0;          // dml: dissimilar pairs are pushed past this squared distance
  int64_t eval_pairs = 2000;    // dml: pairs drawn for objective, accuracy and AUC
  int64_t atoms = 64;           // sparse_coding: dictionary size
  double gamma = 0.1;           // sparse_coding: l1 weight of the codes
  int64_t lasso_steps = 30;     // sparse_coding: FISTA iterations per code
  // [model.params]: a plugin's own keys, kept as TOML text with where they were set.
  struct Param {
    std::string key;
    std::string value;  // TOML text: 3, 0.5, "text", true
    std::string type;   // integer | float | string | boolean
    std::string where;  // file:line or --set ...
  };
  std::vector<Param> params;
};

struct OptimizerConfig {
  double lr = 0.1;
  bool lr_auto = false;  // optimizer.lr = "auto": sfbd searches it at start-up (apps/sfbd/lr_policy.h)
  // Not a key: the config said "auto" (kept once the search or a checkpoint resolved lr). The
  // fingerprints compare what the user wrote, so a job resumes from its own checkpoints.
  bool lr_auto_written = false;
  int64_t lr_search_clocks = 0;  // clocks each candidate of the search trains (0: lr_trial_clocks's rule)
  double lr_decay = 0.0;         // eta_c = lr / (1 + lr_decay * c)
  int64_t minibatch = 64;
  // Not keys: a learning-rate trial's schedule, the run's decay compressed into the trial (clock c
  // of the trial is clock origin + (c - origin) * scale of the run). 0 and 1 outside trials.
  int64_t schedule_origin = 0;
  double schedule_scale = 1.0;
  // The step size at clock (or iteration) c.
  double step(int64_t c) const {
    const double s = static_cast<double>(schedule_origin) + static_cast<double>(c - schedule_origin) * schedule_scale;
    return lr / (1.0 + lr_decay * s);
  }
};

struct CommConfig {
  Scheme scheme = Scheme::kSfb;    // auto: sfbd resolves it before training
  std::string auto_profile;        // auto: a recorded scheme profile to predict from ("" measures one)
  double inject_latency_us = 0.0;  // added to every message's delivery (latency studies)
  TransportKind transport = TransportKind::kAuto;
  std::string interface;                        // tcp: "" (every interface) or an interface name / IPv4 address
  std::string secret_file;                      // tcp: a file every rank reads, mixed into the job key ("" none)
  std::string tcp_congestion;                   // tcp: the connections' congestion control ("" the host's)
  Collectives collectives = Collectives::kSfb;  // the dense all-reduce's engine
};

struct SfbConfig {
  int64_t staleness = 0;  // kInfiniteStaleness for ASP
  Broadcast broadcast = Broadcast::kFull;
  int64_t halton_q = 0;                    // 0: ceil(log2 P)
  Reconcile reconcile = Reconcile::kAuto;  // runtime::reconcile_mode resolves it (runtime/job_rules.h)
  int64_t reconcile_every = 0;             // clocks; 0: about 10% of the factor bytes
  bool asp() const { return staleness == kInfiniteStaleness; }
  std::string consistency_name() const;  // "BSP", "SSP(s=3)" or "ASP"
};

struct FmsConfig {
  int64_t servers = 1;  // parameter-server ranks after the P workers
};

struct RuntimeConfig {
  int64_t threads = 0;  // 0: cores on this host / ranks on this host, at least 1
  int64_t queue_capacity = 64;
  int64_t asp_window = 64;        // ASP flow control: at most this many clocks ahead of any in-neighbour
  double peer_timeout_s = 600.0;  // waiting this long on peers without progress is an error
  int64_t slow_rank = -1;         // studies: this rank sleeps slow_ms per clock (runtime/study_hooks.h)
  double slow_ms = 0.0;
};

struct EvalConfig {
  int64_t every = 50;
  int64_t train_sample = 5000;
  double drift_warn = -1;  // replica drift above this is warned about (0: never; -1, "auto": runtime::drift_warn_for)
  // How rank 0's monitor sees W: "copy" (one snapshot, evaluated while training goes on),
  // "in_place" (no copy: W stays at the clock until the evaluation is done), "auto" (copy when W
  // is at most kSnapshotAutoBytes).
  Snapshot snapshot = Snapshot::kAuto;
  static constexpr double kSnapshotAutoBytes = 64.0 * (1 << 20);
  bool copies(double w_bytes) const {
    return snapshot == Snapshot::kCopy || (snapshot == Snapshot::kAuto && w_bytes <= kSnapshotAutoBytes);
  }
};

struct StopConfig {
  int64_t max_clocks = 1000;
  double max_seconds = 0.0;
  double target_accuracy = 0.0;
  double target_objective = 0.0;
  double rel_tol = 0.0;
  int64_t patience = 3;
  // Models that report a duality gap (L2-MLR's SDCA): converged once the gap is at most this share
  // of the objective, liblinear's -e in spirit (0: off).
  double gap_tol = 0.01;
  double divergence_factor = 100.0;  // diverged when the objective exceeds this times its start (0: off)
  double max_replica_drift = 0.0;    // > 0: replica drift above this ends the run (exit 4)
  double max_epochs = 0.0;           // 0: off
  // The clock limit: max_clocks, or fewer when max_epochs passes of `total_rows` training rows end
  // first at `rows_per_clock` rows a clock (all workers together); at least 1.
  int64_t clock_limit(int64_t total_rows, int64_t rows_per_clock) const;
};

struct CheckpointConfig {
  int64_t every = 0;  // clocks; 0: only at the end of a stopped run (when path set)
  std::string path;   // relative to output.dir; "": no checkpoints
};

struct OutputConfig {
  std::string dir = "runs/default";
  std::string metrics = "metrics.jsonl";
  std::string model = "model.bin";
  std::string summary = "summary.json";
  std::string log_level = "info";
  std::string trace;                    // mgwfbp: Chrome trace, relative to dir
  std::string profile = "profile.csv";  // mgwfbp: the measured layer profile (mgwfbp-plan's CSV)
  int64_t trace_iters = 5;
  TraceRanks trace_ranks = TraceRanks::kRank0;  // mgwfbp
  // `file` under dir ("" when file is ""; file itself when it is absolute or dir is "").
  std::string path(const std::string& file) const;
};

struct CnnConfig {
  std::string layers = "conv:16:5:2,relu,pool:2,conv:32:5:2,relu,pool:2,fc:128,relu,fc:10";
  std::string input = "1x28x28";
  CnnKernels kernels = CnnKernels::kOnednn;
  double momentum = 0.9;
  double weight_decay = 0.0;
};

struct MgwfbpConfig {
  std::string planner = "mgwfbp";
  int64_t profile_iters = 10;
  double replan_threshold = 0.0;
  int64_t replan_every = 200;
};

struct Config {
  std::string source = "<defaults>";   // the file it was read from
  std::vector<std::string> overrides;  // the --set arguments it was built with, as given

  JobConfig job;
  DataConfig data;
  ModelConfig model;
  OptimizerConfig optimizer;
  CommConfig comm;
  SfbConfig sfb;
  FmsConfig fms;
  RuntimeConfig runtime;
  EvalConfig eval;
  StopConfig stop;
  CheckpointConfig checkpoint;
  OutputConfig output;
  CnnConfig cnn;
  MgwfbpConfig mgwfbp;

  // Every key with its resolved value as TOML text (schema order, then model.params.*): what a
  // run records in summary.json, so runs of a sweep can be told apart.
  std::vector<std::pair<std::string, std::string>> settings() const;
  // The settings as one JSON object, each value typed (numbers, strings, booleans, arrays, tables
  // as JSON; a float that is not finite as the string "inf", "-inf" or "nan"): summary.json's.
  std::string settings_json() const;
  // The settings as a TOML file that loads back into this config (dotted keys, one a line, a
  // header naming the source and overrides): what a run leaves in output.dir.
  std::string resolved_toml() const;
  // Every resolved value in a fixed order: the fingerprint all ranks must agree on.
  std::string canonical() const;
  uint64_t fingerprint() const;
  // Only what defines the model and its training data and schedule (job.seed, data.*, model.*,
  // optimizer.*): a checkpoint can be resumed under other staleness, ranks, stop or output keys.
  uint64_t model_fingerprint() const;
  // The CNN mode's (job.mode = "mgwfbp"): job.seed, data.*, optimizer.*, cnn.layers, cnn.input,
  // cnn.momentum and cnn.weight_decay; a checkpoint resumes under other kernels, device, planner,
  // ranks, stop or output keys.
  uint64_t cnn_fingerprint() const;
  // A setting's value as the user wrote it, for the fingerprints (optimizer.lr "auto" once resolved).
  std::string written(const std::string& key, const std::string& value) const;
};

// Reads and validates a TOML file; overrides are "key=value" strings applied on top (the value is
// parsed as TOML, and as a plain string when that fails).
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Same, from TOML text (tests); `name` stands in for the file name in messages.
Config parse_config(const std::string& toml_text, const std::string& name,
                    const std::vector<std::string>& overrides = {});

// One documented key of the schema (used for configs/README.md and `sfbd --keys`).
struct ConfigKeyDoc {
  std::string key;
  std::string type;
  std::string default_value;
  std::string help;
  std::string mode;  // the job.mode that reads it ("" both)
};
std::vector<ConfigKeyDoc> config_key_docs();

// The resolved value of schema key `key` as TOML text ("0.5", "\"sgd\"", "true"); empty when the
// schema has no such key.
std::string config_value(const Config& cfg, const std::string& key);

}  // namespace sfb

// fmt prints a config choice by name.
template <sfb::ConfigChoice E>
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(E e, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(sfb::name(e), ctx);
  }
};
