#include "sfb/core/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/core/strings.h"

namespace sfb {
namespace {

// Where a value came from, for messages: "file:line" or "--set key=value".
struct Origin {
  std::string file;
  std::map<std::string, std::string> overrides;  // key -> "--set key=value"

  std::string at(const std::string& key, const toml::node& node) const {
    if (auto it = overrides.find(key); it != overrides.end()) return it->second;
    return fmt::format("{}:{}", file, node.source().begin.line);
  }
};

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

// A value as it appears in messages: quoted when a string, cut short when long (core/strings.h).
std::string show_node(const toml::node& n) {
  std::ostringstream os;
  if (auto s = n.as_string()) {
    os << '"' << s->get() << '"';
  } else {
    n.visit([&os](auto&& v) { os << v; });
  }
  return excerpt(os.str());
}

// The longest string value a key may hold (a path: PATH_MAX).
constexpr size_t kMaxStringBytes = 4096;

struct Field {
  std::string key;
  std::string type;
  std::function<std::string(const Config&)> show;
  std::function<void(Config&, const toml::node&, const std::string& where)> set;
  std::string help;
  // The job.mode that reads the key (none: both): set in another mode, it is an error naming the key.
  std::optional<JobMode> mode;
  // A key of the built-in models: set with model.plugin, it is an error (a plugin reads
  // [model.params] only).
  bool built_in_model = false;
};

// The schema's markers: where a key is declared, which mode reads it.
Field sfb_mode(Field f) {
  f.mode = JobMode::kSfb;
  return f;
}
Field cnn_mode(Field f) {
  f.mode = JobMode::kMgwfbp;
  return f;
}
Field built_in_model(Field f) {
  f.built_in_model = true;
  return sfb_mode(std::move(f));
}

std::string fmt_double(double v) { return fmt::format("{}", v); }

template <typename S>
Field int_field(std::string key, S Config::*sec, int64_t S::*m, int64_t lo, int64_t hi, std::string help) {
  return {key, "integer", [sec, m](const Config& c) { return std::to_string(c.*sec.*m); },
          [=](Config& c, const toml::node& n, const std::string& where) {
            SFB_CHECK(n.is_integer(), "{}: {} must be an integer in [{}, {}], got {} {}", where, key, lo, hi,
                      type_name(n), show_node(n));
            const int64_t v = *n.value<int64_t>();
            SFB_CHECK(v >= lo && v <= hi, "{}: {} must be in [{}, {}], got {}", where, key, lo, hi, v);
            c.*sec.*m = v;
          },
          std::move(help)};
}

template <typename S>
Field float_field(std::string key, S Config::*sec, double S::*m, double lo, double hi, std::string help) {
  return {key, "float", [sec, m](const Config& c) { return fmt_double(c.*sec.*m); },
          [=](Config& c, const toml::node& n, const std::string& where) {
            SFB_CHECK(n.is_number(), "{}: {} must be a number in [{}, {}], got {} {}", where, key, lo, hi, type_name(n),
                      show_node(n));
            const double v = *n.value<double>();
            SFB_CHECK(v >= lo && v <= hi, "{}: {} must be in [{}, {}], got {}", where, key, lo, hi, v);
            c.*sec.*m = v;
          },
          std::move(help)};
}

// A number in [lo, hi] or the string "auto" (nullopt through `get` and `put`: what auto means is
// the key's owner's to resolve).
Field float_or_auto_field(std::string key, double lo, double hi,
                          std::function<std::optional<double>(const Config&)> get,
                          std::function<void(Config&, std::optional<double>)> put, std::string help) {
  return {key, "float or \"auto\"",
          [get](const Config& c) {
            const auto v = get(c);
            return v ? fmt_double(*v) : std::string("\"auto\"");
          },
          [=](Config& c, const toml::node& n, const std::string& where) {
            if (n.is_string() && *n.value<std::string>() == "auto") return put(c, std::nullopt);
            SFB_CHECK(n.is_number() && *n.value<double>() >= lo && *n.value<double>() <= hi,
                      "{}: {} must be a number in [{}, {}] or \"auto\", got {}", where, key, lo, hi, show_node(n));
            put(c, *n.value<double>());
          },
          std::move(help)};
}

template <typename S>
Field string_field(std::string key, S Config::*sec, std::string S::*m, std::vector<std::string> choices,
                   std::string help) {
  return {key, choices.empty() ? "string" : fmt::format("one of {}", fmt::join(choices, "|")),
          [sec, m](const Config& c) { return fmt::format("\"{}\"", c.*sec.*m); },
          [=](Config& c, const toml::node& n, const std::string& where) {
            SFB_CHECK(n.is_string(), "{}: {} must be a string, got {} {}", where, key, type_name(n), show_node(n));
            std::string v = *n.value<std::string>();
            SFB_CHECK(v.size() <= kMaxStringBytes, "{}: {} is {} bytes long (at most {}): {}", where, key, v.size(),
                      kMaxStringBytes, show_node(n));
            if (!choices.empty()) {
              bool ok = false;
              for (const auto& ch : choices) ok = ok || ch == v;
              SFB_CHECK(ok, "{}: {} must be one of \"{}\", got \"{}\"", where, key, fmt::join(choices, "\", \""), v);
            }
            c.*sec.*m = std::move(v);
          },
          std::move(help)};
}

// One of a ConfigChoice's names (config.h), parsed into the enum once.
template <typename S, ConfigChoice E>
Field choice_field(std::string key, S Config::*sec, E S::*m, std::string help) {
  std::vector<std::string> names;
  for (const auto n : ChoiceNames<E>::names) names.emplace_back(n);
  return {key, fmt::format("one of {}", fmt::join(names, "|")),
          [sec, m](const Config& c) { return fmt::format("\"{}\"", name(c.*sec.*m)); },
          [=](Config& c, const toml::node& n, const std::string& where) {
            const auto v = n.value<std::string>();
            const auto e = v ? choice_named<E>(*v) : std::nullopt;
            SFB_CHECK(e, "{}: {} must be one of \"{}\", got {}", where, key, fmt::join(names, "\", \""), show_node(n));
            c.*sec.*m = *e;
          },
          std::move(help)};
}

template <typename S>
Field bool_field(std::string key, S Config::*sec, bool S::*m, std::string help) {
  return {key, "boolean", [sec, m](const Config& c) { return c.*sec.*m ? "true" : "false"; },
          [=](Config& c, const toml::node& n, const std::string& where) {
            SFB_CHECK(n.is_boolean(), "{}: {} must be true or false, got {} {}", where, key, type_name(n),
                      show_node(n));
            c.*sec.*m = *n.value<bool>();
          },
          std::move(help)};
}

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr double kHuge = 1e300;
// The longest duration a timer here honours: a year. Longer ones would overflow deadlines.
constexpr double kMaxSeconds = 365.0 * 24 * 3600;

// declarative table
const std::vector<Field>& schema() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> f;
    f.push_back(choice_field("job.mode", &Config::job, &JobConfig::mode,
                             "Training mode. \"sfb\": sufficient factor broadcasting of a matrix model; "
                             "\"mgwfbp\": data-parallel CNN training with merged-gradient wait-free "
                             "backpropagation (docs/mgwfbp.md)."));
    f.push_back(choice_field("device", &Config::job, &JobConfig::device,
                             "mgwfbp mode: where the CNN layers run (a top-level key: `--set device=cuda`)."));
    f.push_back(cnn_mode(string_field("cnn.layers", &Config::cnn, &CnnConfig::layers, {},
                                      "mgwfbp: the network, comma separated: conv:<channels>:<kernel>[:<pad>], relu, "
                                      "pool:<k>, fc:<outputs>; softmax cross-entropy on the last layer.")));
    f.push_back(
        cnn_mode(string_field("cnn.input", &Config::cnn, &CnnConfig::input, {}, "mgwfbp: input shape <c>x<h>x<w>.")));
    f.push_back(cnn_mode(choice_field("cnn.kernels", &Config::cnn, &CnnConfig::kernels,
                                      "mgwfbp, device = \"cpu\": the layer implementations. \"onednn\": oneDNN "
                                      "convolution, pooling and ReLU, BLAS fully connected layers; \"reference\": "
                                      "im2col + Eigen and plain loops (docs/performance.md).")));
    f.push_back(cnn_mode(
        float_field("cnn.momentum", &Config::cnn, &CnnConfig::momentum, 0.0, 0.999999, "mgwfbp: SGD momentum.")));
    f.push_back(cnn_mode(
        float_field("cnn.weight_decay", &Config::cnn, &CnnConfig::weight_decay, 0.0, 1.0, "mgwfbp: L2 weight decay.")));
    f.push_back(cnn_mode(string_field("mgwfbp.planner", &Config::mgwfbp, &MgwfbpConfig::planner, {},
                                      "mgwfbp: the merge planner (mgwfbp-plan compares them all).")));
    f.push_back(cnn_mode(int_field("mgwfbp.profile_iters", &Config::mgwfbp, &MgwfbpConfig::profile_iters, 1, 1 << 20,
                                   "mgwfbp: iterations measured (as SyncEASGD) before the plan is made.")));
    f.push_back(
        cnn_mode(float_field("mgwfbp.replan_threshold", &Config::mgwfbp, &MgwfbpConfig::replan_threshold, 0.0, 100.0,
                             "mgwfbp: re-time the communication and re-plan when the backward time drifts by "
                             "more than this fraction from its median over the first 20 iterations under the "
                             "current plan (0: never).")));
    f.push_back(cnn_mode(int_field("mgwfbp.replan_every", &Config::mgwfbp, &MgwfbpConfig::replan_every, 1, 1 << 30,
                                   "mgwfbp: iterations between drift checks.")));
    f.push_back({"job.seed", "integer >= 0", [](const Config& c) { return std::to_string(c.job.seed); },
                 [](Config& c, const toml::node& n, const std::string& where) {
                   SFB_CHECK(n.is_integer() && *n.value<int64_t>() >= 0, "{}: job.seed must be an integer >= 0, got {}",
                             where, show_node(n));
                   c.job.seed = static_cast<uint64_t>(*n.value<int64_t>());
                 },
                 "Seed of every random stream (minibatches, synthetic data, init)."});
    f.push_back(choice_field("data.format", &Config::data, &DataConfig::format, "Training data format."));
    f.push_back(string_field("data.train_images", &Config::data, &DataConfig::train_images, {},
                             "idx: training images (IDX3, optionally gzipped)."));
    f.push_back(string_field("data.train_labels", &Config::data, &DataConfig::train_labels, {},
                             "idx: training labels (IDX1, optionally gzipped)."));
    f.push_back(string_field("data.test_images", &Config::data, &DataConfig::test_images, {},
                             "idx: test images; empty disables test accuracy."));
    f.push_back(string_field("data.test_labels", &Config::data, &DataConfig::test_labels, {}, "idx: test labels."));
    f.push_back(string_field("data.train", &Config::data, &DataConfig::train, {}, "libsvm: training file."));
    f.push_back(string_field("data.test", &Config::data, &DataConfig::test, {},
                             "libsvm: test file; empty disables test accuracy."));
    f.push_back(int_field("data.features", &Config::data, &DataConfig::features, 0, int64_t{1} << 31,
                          "libsvm: number of features (indices 1..features); 0: the largest index in "
                          "data.train (one pass, as liblinear reads it; the test file's larger indices are "
                          "skipped). synthetic: D before the bias, required."));
    f.push_back(int_field("data.classes", &Config::data, &DataConfig::classes, 0, int64_t{1} << 31,
                          "Number of classes J. 0: from the training file: idx: max label + 1; libsvm: its "
                          "distinct labels (any integers) mapped to 0..J-1 in ascending order, the map kept in "
                          "the model file (as liblinear does). Required for synthetic."));
    f.push_back(int_field("data.label_offset", &Config::data, &DataConfig::label_offset, -kMax, kMax,
                          "libsvm with data.classes set: subtracted from every label (1 for labels 1..J)."));
    f.push_back(
        bool_field("data.bias", &Config::data, &DataConfig::bias, "Append a constant 1 feature (D grows by 1)."));
    f.push_back(choice_field("data.partition", &Config::data, &DataConfig::partition,
                             "Which training rows each rank holds: \"shuffled\": a seeded random 1/P of the rows "
                             "(job.seed; the same permutation for every P, so a file sorted by label still gives "
                             "every rank every class); \"contiguous\": rows in file order, rank r the r-th "
                             "block."));
    f.push_back(int_field("data.max_train_samples", &Config::data, &DataConfig::max_train_samples, 0, kMax,
                          "Use only the first N training samples (0: all)."));
    f.push_back(int_field("data.max_test_samples", &Config::data, &DataConfig::max_test_samples, 0, kMax,
                          "Use only the first N test samples (0: all)."));
    f.push_back(int_field("data.synthetic_samples", &Config::data, &DataConfig::synthetic_samples, 1, kMax,
                          "synthetic: training samples."));
    f.push_back(int_field("data.synthetic_test_samples", &Config::data, &DataConfig::synthetic_test_samples, 0, kMax,
                          "synthetic: test samples."));
    f.push_back(float_field("data.synthetic_density", &Config::data, &DataConfig::synthetic_density, 1e-9, 1.0,
                            "synthetic: fraction of non-zero features; < 1 gives sparse v."));
    f.push_back(float_field("data.synthetic_noise", &Config::data, &DataConfig::synthetic_noise, 0.0, 1.0,
                            "synthetic: fraction of labels replaced by a random class."));
    f.push_back(float_field("data.synthetic_separation", &Config::data, &DataConfig::synthetic_separation, 0.0, 1e6,
                            "synthetic: distance between class prototypes in noise standard deviations."));
    f.push_back(built_in_model(
        string_field("model.name", &Config::model, &ModelConfig::name, {"mlr", "l2mlr", "dml", "sparse_coding"},
                     "Built-in model: \"mlr\" (multiclass logistic regression), \"l2mlr\" (MLR + "
                     "L2, proximal SGD or SDCA), \"dml\" (distance metric learning), "
                     "\"sparse_coding\" (dictionary learning). See docs/models.md.")));
    f.push_back(sfb_mode(string_field("model.plugin", &Config::model, &ModelConfig::plugin, {},
                                      "Shared library of a user model (docs/plugins.md); when set, model.name is "
                                      "not used. Its own keys go in [model.params]. A relative path in the config "
                                      "file is relative to that file; with --set, to the working directory.")));
    f.push_back(string_field("model.init", &Config::model, &ModelConfig::init, {},
                             "Warm start: a model file (output.model of an earlier run, docs/formats.md) whose W "
                             "replaces the model's initialisation; its shape must match. Relative to the working "
                             "directory, like the data paths. --resume takes precedence (it continues a run)."));
    f.push_back(built_in_model(
        string_field("model.layout", &Config::model, &ModelConfig::layout, {"auto", "row-major", "feature-major"},
                     "How the built-in models keep W in memory: \"auto\" (mlr and l2mlr feature-major on "
                     "sparse data, where each non-zero of v updates one contiguous run of J floats; "
                     "row-major otherwise), \"row-major\" (J x D) or \"feature-major\" (D x J; mlr and "
                     "l2mlr only). Files hold W row-major either way. A plugin declares its own.")));
    f.push_back(built_in_model(float_field("model.lambda", &Config::model, &ModelConfig::lambda, 0.0, 1e6,
                                           "l2mlr: L2 weight lambda of (lambda/2)||W||^2 (model.C > 0 sets it).")));
    f.push_back(built_in_model(float_field("model.C", &Config::model, &ModelConfig::C, 0.0, 1e12,
                                           "l2mlr: liblinear's C (-c): > 0 sets lambda = 1 / (C n), n the "
                                           "training rows, so that n lambda/2 ||W||^2 + sum of losses is "
                                           "liblinear's ||W||^2/2 + C sum of losses; 0: model.lambda.")));
    f.push_back(built_in_model(string_field("model.solver", &Config::model, &ModelConfig::solver, {"sgd", "sdca"},
                                            "l2mlr: \"sgd\" (proximal SGD, O(1) prox by a scale factor) or \"sdca\" "
                                            "(stochastic dual coordinate ascent; optimizer.lr is not used).")));
    f.push_back(
        built_in_model(float_field("model.sdca_sigma", &Config::model, &ModelConfig::sdca_sigma, 0.0, 1e12,
                                   "l2mlr sdca: damping of the dual step for simultaneous updates; 0: from the data, "
                                   "how much P * K steps at once collide given their rows and classes (between 1 "
                                   "and P * K; docs/models.md); smaller is faster but may stop being an ascent.")));
    f.push_back(built_in_model(int_field("model.dim", &Config::model, &ModelConfig::dim, 1, 1 << 24,
                                         "dml: rows of L, the dimension of the learned projection.")));
    f.push_back(built_in_model(float_field("model.margin", &Config::model, &ModelConfig::margin, 1e-12, 1e12,
                                           "dml: dissimilar pairs are pushed until ||L(x-y)||^2 >= margin.")));
    f.push_back(built_in_model(int_field("model.eval_pairs", &Config::model, &ModelConfig::eval_pairs, 2, 1 << 24,
                                         "dml: pairs (half similar) drawn from the evaluated data for the objective, "
                                         "pair accuracy and AUC.")));
    f.push_back(built_in_model(int_field("model.atoms", &Config::model, &ModelConfig::atoms, 1, 1 << 24,
                                         "sparse_coding: dictionary size (columns of B = D of W).")));
    f.push_back(built_in_model(float_field("model.gamma", &Config::model, &ModelConfig::gamma, 0.0, 1e6,
                                           "sparse_coding: l1 weight gamma of the codes.")));
    f.push_back(built_in_model(int_field("model.lasso_steps", &Config::model, &ModelConfig::lasso_steps, 1, 1 << 20,
                                         "sparse_coding: FISTA iterations per code (B fixed).")));
    f.push_back(float_or_auto_field(
        "optimizer.lr", 1e-12, 1e6,
        [](const Config& c) { return c.optimizer.lr_auto ? std::nullopt : std::optional<double>(c.optimizer.lr); },
        [](Config& c, std::optional<double> v) {
          c.optimizer.lr_auto = !v;
          c.optimizer.lr_auto_written = !v;
          if (v) c.optimizer.lr = *v;
        },
        "Step size eta. sfb mode: of one batch, u is scaled by -eta/K; every worker applies every received "
        "batch with it, so a clock moves W by the sum of the P workers' steps (as P serial SGD steps; divide "
        "lr by P for the step of one averaged batch). mgwfbp mode: of the gradient averaged over all ranks' "
        "minibatches (with momentum). \"auto\" (either mode): sfbd searches it at start-up on the job's "
        "own data and ranks, judging each candidate on held-out rows (optimizer.lr_search_clocks per "
        "candidate; docs/models.md), and logs and records the value it trains with."));
    f.push_back(int_field("optimizer.lr_search_clocks", &Config::optimizer, &OptimizerConfig::lr_search_clocks, 0,
                          100000,
                          "optimizer.lr = \"auto\": clocks (mgwfbp: iterations) each candidate learning rate trains "
                          "from the start, with the run's lr_decay compressed into them; 0: half the run, at least 30 "
                          "and at most 1000 (5 to 9 candidates; docs/models.md)."));
    f.push_back(float_field("optimizer.lr_decay", &Config::optimizer, &OptimizerConfig::lr_decay, 0.0, 1e6,
                            "Step size at clock c is lr / (1 + lr_decay * c)."));
    f.push_back(int_field("optimizer.minibatch", &Config::optimizer, &OptimizerConfig::minibatch, 1, 1 << 20,
                          "K: samples (SF pairs) per worker per clock."));
    f.push_back({"sfb.staleness", "integer >= 0 or \"inf\"",
                 [](const Config& c) { return c.sfb.asp() ? std::string("\"inf\"") : std::to_string(c.sfb.staleness); },
                 [](Config& c, const toml::node& n, const std::string& where) {
                   // "inf" as a string, or TOML's float inf (what `--set sfb.staleness=inf` parses to).
                   if ((n.is_string() && *n.value<std::string>() == "inf") ||
                       (n.is_floating_point() && std::isinf(*n.value<double>()) && *n.value<double>() > 0)) {
                     c.sfb.staleness = kInfiniteStaleness;
                     return;
                   }
                   SFB_CHECK(n.is_integer() && *n.value<int64_t>() >= 0 && *n.value<int64_t>() <= kMaxClock,
                             "{}: sfb.staleness must be 0 to 2^53 or \"inf\", got {}", where, show_node(n));
                   c.sfb.staleness = *n.value<int64_t>();
                 },
                 "0: BSP, s > 0: SSP (at most s clocks ahead), \"inf\": ASP."});
    f.push_back(
        sfb_mode(choice_field("sfb.broadcast", &Config::sfb, &SfbConfig::broadcast,
                              "Broadcast topology: \"full\" sends to all P-1 peers; \"halton\" to Q peers per "
                              "clock that rotate along the Halton offsets floor(P h_k), h = 1/2, 1/4, 3/4, ..., so "
                              "every peer is reached within ceil((P-1)/Q) clocks (docs/compare.md); "
                              "\"halton-static\": the SFB paper's fixed Q peers (p + floor(P h_k)) mod P, refused "
                              "when they split the workers into islands.")));
    f.push_back(sfb_mode(int_field("sfb.halton_q", &Config::sfb, &SfbConfig::halton_q, 0, 1 << 20,
                                   "Halton broadcast: peers per worker Q (0: ceil(log2 P)).")));
    f.push_back(sfb_mode(choice_field(
        "sfb.reconcile", &Config::sfb, &SfbConfig::reconcile,
        "Partial broadcast under BSP: every sfb.reconcile_every clocks the workers all-reduce W and agree on one "
        "consensus, so replicas whose partitions differ cannot drift apart. \"mean\": model averaging (any prox); "
        "\"sum\": every update counted once (full broadcast's step from stale gradients: measured unstable beyond a "
        "few clocks); \"auto\": mean under BSP partial broadcast, off under full broadcast, SSP and ASP; \"off\": "
        "never (replica_drift shows the cost).")));
    f.push_back(
        sfb_mode(int_field("sfb.reconcile_every", &Config::sfb, &SfbConfig::reconcile_every, 0, kMaxClock,
                           "Clocks between reconciliations (0: the period at which the all-reduce costs about 10% of "
                           "the factor bytes partial broadcast sends).")));
    f.push_back(sfb_mode(choice_field(
        "comm.scheme", &Config::comm, &CommConfig::scheme,
        "\"sfb\": sufficient factor broadcasting; \"fms\": full-matrix sync through "
        "fms.servers parameter-server ranks (mpirun -np P+S); \"allreduce\": all-reduce "
        "of the dense update matrix every clock (comm.collectives); \"auto\": sfbd profiles the job on the ranks "
        "at start-up, predicts sfb (full), sfb (halton), allreduce and (BSP, over TCP, a model that shards) "
        "sharded and trains with the one predicted fastest; a W that does not fit replicated is sharded without "
        "a profile "
        "(the log and summary.json's \"auto\" give every prediction; docs/compare.md); \"sharded\": W's rows cut "
        "into one block per rank, no rank holds W (BSP; MLR, L2-MLR sgd, DML and plugins with the row-sharded "
        "interface; docs/design.md, \"The sharded scheme\").")));
    f.push_back(sfb_mode(string_field("comm.auto_profile", &Config::comm, &CommConfig::auto_profile, {},
                                      "comm.scheme = \"auto\": a scheme profile (sfbd --profile FILE) to predict from "
                                      "instead of measuring one at start-up (\"\": measure).")));
    f.push_back(float_field("comm.inject_latency_us", &Config::comm, &CommConfig::inject_latency_us, 0.0, 1e9,
                            "Added to the delivery of every message (microseconds), for latency studies "
                            "on links without netem."));
    f.push_back(choice_field("comm.transport", &Config::comm, &CommConfig::transport,
                             "\"tcp\": sfb's own sockets, one per pair of ranks, every link moving both ways at "
                             "once (mpirun starts the ranks, MPI exchanges their addresses); \"mpi\": MPI "
                             "point-to-point messages (shared memory on one host; networks TCP cannot use, e.g. "
                             "InfiniBand without IPoIB); \"auto\": \"mpi\" when every rank runs on one host, "
                             "else \"tcp\" (always \"tcp\" under comm.scheme = \"sharded\", whose one thread "
                             "waits on every clock's all-gathers: MPI's transport can only poll)."));
    f.push_back(string_field("comm.interface", &Config::comm, &CommConfig::interface, {},
                             "comm.transport = \"tcp\": the network interface (\"eth0\") or IPv4 address the "
                             "ranks use; \"\": every up interface (ranks in one network namespace use "
                             "loopback)."));
    f.push_back(string_field("comm.secret_file", &Config::comm, &CommConfig::secret_file, {},
                             "comm.transport = \"tcp\": a file of at least 16 bytes, readable by its owner "
                             "only, that every rank reads and mixes into the job's key: a process that can reach "
                             "the ports and read MPI's traffic still cannot join the job (\"\": the key from "
                             "the bootstrap alone; docs/design.md, threat model)."));
    f.push_back(string_field("comm.tcp_congestion", &Config::comm, &CommConfig::tcp_congestion, {},
                             "comm.transport = \"tcp\": the kernel's congestion control on every connection "
                             "(\"cubic\", \"reno\", \"dctcp\", ...; \"\": the host's default). With bbr "
                             "sfb's all-reduce stalled 4-7x at 8 ranks in holds of 100-200 ms "
                             "(docs/compare.md); sfbd warns when the connections run bbr."));
    f.push_back(choice_field("comm.collectives", &Config::comm, &CommConfig::collectives,
                             "The all-reduce of comm.scheme = \"allreduce\" and of the CNN mode's dense groups: "
                             "\"sfb\": sfb's pipelined rank-order all-reduce on comm.transport (every replica "
                             "bitwise equal under every plan); \"mpi\": Open MPI's MPI_Allreduce (its own "
                             "algorithms and network; replicas checked by their checksums)."));
    f.push_back(sfb_mode(int_field("fms.servers", &Config::fms, &FmsConfig::servers, 1, 1 << 20,
                                   "comm.scheme = \"fms\": parameter-server ranks S; they are the last S ranks, "
                                   "each holding a row shard of W.")));
    f.push_back(int_field("runtime.threads", &Config::runtime, &RuntimeConfig::threads, 0, 4096,
                          "OpenMP threads per rank for SF computation and updates; 0: the CPUs the launcher bound "
                          "the rank to, else cores on its host / ranks on its host (at least 1), the least over "
                          "the ranks (uneven layouts compute alike)."));
    f.push_back(sfb_mode(int_field("runtime.queue_capacity", &Config::runtime, &RuntimeConfig::queue_capacity, 1,
                                   1 << 20, "Capacity of each SF queue (batches).")));
    f.push_back(sfb_mode(int_field("runtime.asp_window", &Config::runtime, &RuntimeConfig::asp_window, 1, kMaxClock,
                                   "ASP flow control: a worker runs at most this many clocks ahead of any "
                                   "in-neighbour, so a fast worker cannot flood a slow one's memory.")));
    f.push_back(float_field("runtime.peer_timeout_s", &Config::runtime, &RuntimeConfig::peer_timeout_s, 0.001,
                            kMaxSeconds,
                            "A rank that waits this long for peers without any progress stops with an "
                            "error naming the ranks it waits for (a stopped, hung or lost peer); every wait on a "
                            "peer, also at start-up and shutdown, is bounded by it."));
    f.push_back(sfb_mode(int_field("runtime.slow_rank", &Config::runtime, &RuntimeConfig::slow_rank, -1, 1 << 20,
                                   "Testing and studies: this rank sleeps slow_ms per clock (-1: none).")));
    f.push_back(sfb_mode(float_field("runtime.slow_ms", &Config::runtime, &RuntimeConfig::slow_ms, 0.0, 1e7,
                                     "Milliseconds the slow rank sleeps per clock.")));
    f.push_back(sfb_mode(float_or_auto_field(
        "eval.drift_warn", 0.0, 1e12,
        [](const Config& c) { return c.eval.drift_warn < 0 ? std::nullopt : std::optional<double>(c.eval.drift_warn); },
        [](Config& c, std::optional<double> v) { c.eval.drift_warn = v.value_or(-1); },
        "Warn (progress line, summary.json replica_drift.warnings) when the replica drift exceeds this "
        "(0: never). \"auto\": 0.5 for full broadcast; for partial broadcast 1.5 sqrt((1 - p) / p), p "
        "= (Q + 1) / P the share of the updates a replica receives: how far replicas sit from their mean "
        "when the updates they miss are uncorrelated (healthy shuffled data never crosses it; "
        "docs/compare.md).")));
    f.push_back(sfb_mode(
        choice_field("eval.snapshot", &Config::eval, &EvalConfig::snapshot,
                     "How rank 0 evaluates and checkpoints W: \"copy\" (one snapshot of W, evaluated while "
                     "training goes on: one more W in memory), \"in_place\" (no copy: rank 0's update "
                     "waits while the monitor reads its replica), \"auto\" (copy when W is at most 64 MiB).")));
    f.push_back(int_field("eval.every", &Config::eval, &EvalConfig::every, 1, kMaxClock,
                          "Rank 0 evaluates the objective every this many clocks."));
    f.push_back(int_field("eval.train_sample", &Config::eval, &EvalConfig::train_sample, 1, kMax,
                          "Training samples on which the objective is evaluated: a fixed uniform sample of the "
                          "whole training set (every partition), read by rank 0 at start-up."));
    f.push_back(int_field("stop.max_clocks", &Config::stop, &StopConfig::max_clocks, 1, kMaxClock,
                          "Stop after this many clocks."));
    f.push_back(float_field("stop.max_epochs", &Config::stop, &StopConfig::max_epochs, 0.0, 1e9,
                            "Stop after this many passes over the training set (0: off): at most "
                            "ceil(max_epochs * training rows / (workers * optimizer.minibatch)) clocks, and "
                            "never more than stop.max_clocks. Fractions are allowed."));
    f.push_back(sfb_mode(float_field("stop.max_seconds", &Config::stop, &StopConfig::max_seconds, 0.0, kMaxSeconds,
                                     "Stop after this many seconds (0: no limit).")));
    f.push_back(sfb_mode(float_field("stop.target_accuracy", &Config::stop, &StopConfig::target_accuracy, 0.0, 1.0,
                                     "Stop when test accuracy >= this (0: off).")));
    f.push_back(sfb_mode(float_field("stop.target_objective", &Config::stop, &StopConfig::target_objective, 0.0, kHuge,
                                     "Stop when the training objective <= this (0: off).")));
    f.push_back(sfb_mode(float_field("stop.rel_tol", &Config::stop, &StopConfig::rel_tol, 0.0, 1.0,
                                     "Stop when the objective's relative change stays below this for "
                                     "`patience` evaluations (0: off).")));
    f.push_back(
        sfb_mode(float_field("stop.max_replica_drift", &Config::stop, &StopConfig::max_replica_drift, 0.0, 1e12,
                             "Replica drift (how far the workers' replicas of W are from their mean, relative to "
                             "the mean) above this ends the run like a divergence: stop reason \"replica_drift\", "
                             "exit code 4, no model written (0: never; eval.drift_warn only warns).")));
    f.push_back(
        sfb_mode(float_field("stop.divergence_factor", &Config::stop, &StopConfig::divergence_factor, 0.0, 1e12,
                             "The run has diverged (exit code 4, no checkpoint or model with those weights) when "
                             "the objective is not finite or exceeds this multiple of its value at the start "
                             "(0: only when not finite).")));
    f.push_back(sfb_mode(int_field("stop.patience", &Config::stop, &StopConfig::patience, 1, 1 << 20,
                                   "Evaluations the relative change must stay below rel_tol.")));
    f.push_back(sfb_mode(float_field("stop.gap_tol", &Config::stop, &StopConfig::gap_tol, 0.0, 1.0,
                                     "Models that report a duality gap (model.solver = \"sdca\"): stop as "
                                     "converged once the gap is at most this share of the objective, like "
                                     "liblinear's -e (0: off).")));
    f.push_back(int_field("checkpoint.every", &Config::checkpoint, &CheckpointConfig::every, 0, kMaxClock,
                          "Rank 0 writes a checkpoint every this many clocks (0: only when the run "
                          "stops). Needs checkpoint.path."));
    f.push_back(string_field("checkpoint.path", &Config::checkpoint, &CheckpointConfig::path, {},
                             "Checkpoint file, relative to output.dir (\"\": no checkpoints). Written "
                             "atomically; resume with sfbd --resume <file>."));
    f.push_back(string_field("output.dir", &Config::output, &OutputConfig::dir, {},
                             "Directory for metrics, model and summary (created)."));
    f.push_back(string_field("output.metrics", &Config::output, &OutputConfig::metrics, {},
                             "Metrics JSON lines, relative to output.dir (\"\": none)."));
    f.push_back(string_field("output.model", &Config::output, &OutputConfig::model, {},
                             "Final model file, relative to output.dir (\"\": none)."));
    f.push_back(string_field("output.summary", &Config::output, &OutputConfig::summary, {},
                             "Run summary JSON, relative to output.dir (\"\": none)."));
    f.push_back(
        cnn_mode(string_field("output.trace", &Config::output, &OutputConfig::trace, {},
                              "mgwfbp: Chrome trace (chrome://tracing, Perfetto) of the first iterations after "
                              "planning, relative to output.dir (\"\": none): forward and update, backward per layer, "
                              "and each group's collective on its own named track.")));
    f.push_back(
        cnn_mode(string_field("output.profile", &Config::output, &OutputConfig::profile, {},
                              "mgwfbp: the layer profile measured before planning (t_b, t_f, factors and their "
                              "rebuild time t_sf), as the CSV mgwfbp-plan --profile reads, relative to output.dir "
                              "(\"\": none).")));
    f.push_back(cnn_mode(int_field("output.trace_iters", &Config::output, &OutputConfig::trace_iters, 1, 1 << 20,
                                   "mgwfbp: iterations traced.")));
    f.push_back(
        cnn_mode(choice_field("output.trace_ranks", &Config::output, &OutputConfig::trace_ranks,
                              "mgwfbp: whose iterations output.trace holds: rank 0's, or every rank's (one process "
                              "track each, gathered by rank 0 at the end).")));
    f.push_back(string_field("output.log_level", &Config::output, &OutputConfig::log_level,
                             {"trace", "debug", "info", "warn", "error", "off"}, "Log level."));
    return f;
  }();
  return fields;
}

void merge_into(toml::table& dst, const toml::table& src) {
  for (auto&& [k, v] : src) {
    if (const auto* sub = v.as_table()) {
      if (auto* existing = dst.get_as<toml::table>(k)) {
        merge_into(*existing, *sub);
        continue;
      }
    }
    dst.insert_or_assign(k, v);
  }
}

// Applies `--set key=value` overrides to the parsed file; records where each came from.
void apply_overrides(toml::table& root, const std::vector<std::string>& overrides, Origin& origin) {
  for (const auto& ov : overrides) {
    const auto eq = ov.find('=');
    SFB_CHECK(eq != std::string::npos && eq > 0, "--set {}: expected key=value", excerpt(ov));
    const std::string key = trim(ov.substr(0, eq));
    const std::string value = ov.substr(eq + 1);
    toml::table t;
    try {
      t = toml::parse(std::string_view(fmt::format("{} = {}", key, value)), std::string_view("--set"));
    } catch (const toml::parse_error&) {
      try {
        // A bare word such as `--set model.name=mlr` is taken as a string.
        t = toml::parse(std::string_view(fmt::format("{} = \"{}\"", key, value)), std::string_view("--set"));
      } catch (const toml::parse_error& e) {
        throw InvalidArgument(fmt::format("--set {}: cannot parse: {}", excerpt(ov), e.description()));
      }
    }
    merge_into(root, t);
    origin.overrides[key] = fmt::format("--set {}", excerpt(ov, 120));
  }
}

// [model.params]: a plugin's own keys, kept as TOML text (checked by the model that reads them).
void read_model_params(const toml::table& params, Origin& origin, Config& cfg) {
  for (auto&& [pk, pv] : params) {
    const std::string pfull = "model.params." + std::string(pk.str());
    const std::string where = origin.overrides.count(pfull) ? origin.overrides[pfull]
                                                            : fmt::format("{}:{}", origin.file, pk.source().begin.line);
    std::string type;
    switch (pv.type()) {
      case toml::node_type::integer: type = "integer"; break;
      case toml::node_type::floating_point: type = "float"; break;
      case toml::node_type::string: type = "string"; break;
      case toml::node_type::boolean: type = "boolean"; break;
      default:
        throw InvalidArgument(
            fmt::format("{}: {} must be a string, number or boolean, got {}", where, pfull, type_name(pv)));
    }
    cfg.model.params.push_back({std::string(pk.str()), show_node(pv), type, where});
  }
}

// Every key of the file must be in the schema: a typo is an error, never silently ignored.
void check_keys(const toml::table& root, Origin& origin, Config& cfg) {
  std::set<std::string> known, sections;
  for (const auto& field : schema()) {
    known.insert(field.key);
    if (field.key.find('.') != std::string::npos) sections.insert(field.key.substr(0, field.key.find('.')));
  }
  for (auto&& [section, value] : root) {
    const std::string s(section.str());
    const auto* tbl = value.as_table();
    if (!tbl && known.count(s)) continue;  // a top-level key (device)
    if (!tbl || !sections.count(s)) {
      // A section that only an override created is named by that override.
      std::string where = fmt::format("{}:{}", origin.file, section.source().begin.line);
      for (const auto& [key, text] : origin.overrides)
        if (key == s || key.rfind(s + ".", 0) == 0) where = text;
      throw InvalidArgument(fmt::format("{}: unknown {} '{}'; sections are [{}]", where, tbl ? "section" : "key", s,
                                        fmt::join(sections, "], [")));
    }
    for (auto&& [k, v] : *tbl) {
      const std::string full = s + "." + std::string(k.str());
      if (known.count(full)) continue;
      if (full == "model.params" && v.is_table()) {
        read_model_params(*v.as_table(), origin, cfg);
        continue;
      }
      std::vector<std::string> in_section;
      for (const auto& kk : known)
        if (kk.rfind(s + ".", 0) == 0) in_section.push_back(kk.substr(s.size() + 1));
      const std::string where = origin.overrides.count(full) ? origin.overrides[full]
                                                             : fmt::format("{}:{}", origin.file, k.source().begin.line);
      throw InvalidArgument(
          fmt::format("{}: unknown key '{}'; keys of [{}] are: {}", where, full, s, fmt::join(in_section, ", ")));
    }
  }
}

// Rules that involve more than one key.
void check_cross_field_rules(const Config& cfg, const std::string& name) {
  SFB_CHECK(!cfg.optimizer.lr_auto || cfg.comm.scheme != Scheme::kFms,
            "{}: optimizer.lr = \"auto\" is not searched under comm.scheme = \"fms\" (its server ranks take no part "
            "in the trials); set a number",
            name);
  if (cfg.comm.scheme == Scheme::kSharded) {
    SFB_CHECK(cfg.sfb.staleness == 0,
              "{}: comm.scheme = \"sharded\" with sfb.staleness = {}: the sharded scheme is BSP only (a softmax "
              "normaliser from another clock is not a gradient); set sfb.staleness = 0",
              name, cfg.sfb.consistency_name());
    SFB_CHECK(!cfg.optimizer.lr_auto,
              "{}: comm.scheme = \"sharded\" with optimizer.lr = \"auto\": the rate search runs the SFB engine's "
              "trials; search with comm.scheme = \"sfb\" (sfbd --find-lr) and set optimizer.lr to its choice",
              name);
  }
  if (!cfg.model.init.empty()) {
    SFB_CHECK(cfg.job.mode == JobMode::kMgwfbp || !cfg.model.plugin.empty() || cfg.model.name != "l2mlr" ||
                  cfg.model.solver != "sdca",
              "{}: model.init cannot warm-start model.solver = \"sdca\": its dual variables are not in the model "
              "file; use model.solver = \"sgd\" or resume from a checkpoint",
              name);
  }
  if (cfg.sfb.reconcile == Reconcile::kSum || cfg.sfb.reconcile == Reconcile::kMean) {
    SFB_CHECK(cfg.comm.scheme == Scheme::kSfb && cfg.sfb.broadcast != Broadcast::kFull,
              "{}: sfb.reconcile = \"{}\" reconciles partial broadcast, but comm.scheme = \"{}\" and sfb.broadcast = "
              "\"{}\"; use sfb.reconcile = \"auto\"",
              name, cfg.sfb.reconcile, cfg.comm.scheme, cfg.sfb.broadcast);
    SFB_CHECK(cfg.sfb.staleness == 0,
              "{}: sfb.reconcile = \"{}\" needs BSP (sfb.staleness = 0), not {}: the workers are at different "
              "clocks; use sfb.reconcile = \"auto\" (off there) and watch replica_drift",
              name, cfg.sfb.reconcile, cfg.sfb.consistency_name());
  }
  SFB_CHECK(!cfg.output.dir.empty(), "{}: output.dir is empty; name a directory (\".\" for the working directory)",
            name);
  if (cfg.data.format == sfb::DataFormat::kIdx) {
    SFB_CHECK(!cfg.data.train_images.empty() && !cfg.data.train_labels.empty(),
              "{}: data.format = \"idx\" needs data.train_images and data.train_labels", name);
    SFB_CHECK(cfg.data.test_images.empty() == cfg.data.test_labels.empty(),
              "{}: data.test_images and data.test_labels must be given together", name);
  } else if (cfg.data.format == sfb::DataFormat::kLibsvm) {
    // data.train may be left out for --evaluate on data.test (load_data refuses training without it).
    SFB_CHECK(!cfg.data.train.empty() || !cfg.data.test.empty(),
              "{}: data.format = \"libsvm\" needs data.train (and data.test for a test set)", name);
    SFB_CHECK(cfg.data.classes != 1, "{}: data.classes = 1: a classifier needs 2 classes or more (0: from the file)",
              name);
  } else {
    SFB_CHECK(cfg.data.features > 0, "{}: data.format = \"synthetic\" needs data.features > 0", name);
    SFB_CHECK(cfg.data.classes > 1, "{}: data.format = \"synthetic\" needs data.classes >= 2", name);
  }
}

// A relative model.plugin written in the config file is relative to that file (a config and its
// plugin travel together); given with --set it stays relative to the working directory.
void resolve_plugin_path(Config& cfg, const Origin& origin) {
  namespace fs = std::filesystem;
  if (cfg.model.plugin.empty() || fs::path(cfg.model.plugin).is_absolute() || origin.overrides.count("model.plugin"))
    return;
  const fs::path dir = fs::path(origin.file).parent_path();
  if (!dir.empty()) cfg.model.plugin = (dir / cfg.model.plugin).lexically_normal().string();
}

const Field* schema_field(const std::string& key) {
  for (const auto& f : schema())
    if (f.key == key) return &f;
  return nullptr;
}

// With model.plugin the built-in models' keys would be silently unused: the plugin gets its
// settings from [model.params] only, so setting one of them is a mistake worth naming.
void check_plugin_keys(const toml::table& root, const Origin& origin, const Config& cfg) {
  if (cfg.model.plugin.empty()) return;
  for (const auto& f : schema()) {
    if (!f.built_in_model) continue;
    const auto node = root.at_path(f.key);
    if (!node) continue;
    throw InvalidArgument(fmt::format(
        "{}: {} is a key of the built-in models and is not used with model.plugin = \"{}\"; a plugin gets its "
        "settings from [model.params] (e.g. --set model.params.{}=...)",
        origin.at(f.key, *node.node()), f.key, cfg.model.plugin, f.key.substr(6)));
  }
}

// Whether `key` (a full key) is one job.mode = `mode` does not read (the schema's sfb_mode and
// cnn_mode markers; [model.params] goes with model.plugin): set in the config or with --set, such a
// key is an error naming the key and the mode, never silently dropped.
bool unused_by_mode(const std::string& key, JobMode mode) {
  const Field* f = schema_field(key.starts_with("model.params") ? "model.plugin" : key);
  return f && f->mode && *f->mode != mode;
}

void check_mode_keys(const toml::table& root, const Origin& origin, const Config& cfg) {
  const bool cnn = cfg.job.mode == JobMode::kMgwfbp;
  const auto refuse = [&](const std::string& key, const toml::node& node) {
    throw InvalidArgument(fmt::format(
        "{}: {} is not used by job.mode = \"{}\" ({}); remove it, or run the mode that reads it", origin.at(key, node),
        key, cfg.job.mode,
        cnn ? "the CNN mode trains cnn.layers with momentum SGD and stops at stop.max_clocks / stop.max_epochs"
            : "cnn.*, mgwfbp.* and the trace and profile outputs belong to job.mode = \"mgwfbp\""));
  };
  // Every key the config sets (a section's keys, and model.params as one), against the mode's list.
  for (auto&& [section, node] : root) {
    const auto* t = node.as_table();
    if (!t) continue;
    for (auto&& [k, v] : *t) {
      const std::string key = std::string(section.str()) + "." + std::string(k.str());
      if (unused_by_mode(key, cfg.job.mode)) refuse(key, v);
    }
  }
}

Config build(toml::table root, const std::string& name, const std::vector<std::string>& overrides) {
  Origin origin{name, {}};
  apply_overrides(root, overrides, origin);
  Config cfg;
  cfg.source = name;
  cfg.overrides = overrides;
  for (const auto& field : schema()) {
    if (auto node = root.at_path(field.key); node) field.set(cfg, *node.node(), origin.at(field.key, *node.node()));
  }
  check_keys(root, origin, cfg);
  check_plugin_keys(root, origin, cfg);
  check_mode_keys(root, origin, cfg);
  check_cross_field_rules(cfg, name);
  resolve_plugin_path(cfg, origin);
  return cfg;
}

}  // namespace

std::string SfbConfig::consistency_name() const {
  if (staleness == 0) return "BSP";
  if (asp()) return "ASP";
  return fmt::format("SSP(s={})", staleness);
}

std::string OutputConfig::path(const std::string& file) const {
  if (file.empty()) return {};
  if (dir.empty() || file.front() == '/') return file;
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

int64_t StopConfig::clock_limit(int64_t total_rows, int64_t rows_per_clock) const {
  if (max_epochs <= 0.0 || total_rows <= 0 || rows_per_clock <= 0) return max_clocks;
  const double clocks = std::ceil(max_epochs * static_cast<double>(total_rows) / static_cast<double>(rows_per_clock));
  if (clocks >= static_cast<double>(max_clocks)) return max_clocks;
  return std::max<int64_t>(1, static_cast<int64_t>(clocks));
}

std::string Config::canonical() const {
  std::string out;
  for (const auto& [key, value] : settings()) {
    // Output locations may differ between hosts; everything that changes the math may not.
    if (key.rfind("output.", 0) == 0 || key.rfind("checkpoint.", 0) == 0) continue;
    out += key + "=" + value + "\n";
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> Config::settings() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& field : schema()) out.emplace_back(field.key, field.show(*this));
  for (const auto& p : model.params) out.emplace_back("model.params." + p.key, p.value);
  return out;
}

namespace {

nlohmann::json toml_to_json(const toml::node& n) {
  if (const auto* t = n.as_table()) {
    nlohmann::json j = nlohmann::json::object();
    for (auto&& [k, v] : *t) j[std::string(k.str())] = toml_to_json(v);
    return j;
  }
  if (const auto* a = n.as_array()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& v : *a) j.push_back(toml_to_json(v));
    return j;
  }
  if (const auto v = n.value_exact<std::string>()) return *v;
  if (const auto v = n.value_exact<int64_t>()) return *v;
  if (const auto v = n.value_exact<bool>()) return *v;
  if (const auto v = n.value_exact<double>()) {
    if (std::isfinite(*v)) return *v;
    return std::isnan(*v) ? "nan" : *v > 0 ? "inf" : "-inf";
  }
  return nullptr;  // dates and times (no key has one): the caller keeps the TOML text
}

}  // namespace

std::string Config::settings_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : settings()) {
    try {
      const toml::table t = toml::parse("v = " + value);
      j[key] = toml_to_json(*t.get("v"));
      if (j[key].is_null()) j[key] = value;
    } catch (const toml::parse_error&) {
      j[key] = value;  // not TOML (never expected): the text itself
    }
  }
  return j.dump();
}

std::string Config::resolved_toml() const {
  std::string out =
      fmt::format("# Every key of this run, resolved: {} with {} --set override(s)", source, overrides.size());
  for (const auto& o : overrides) out += fmt::format("\n#   --set {}", o);
  out += "\n";
  for (const auto& [key, value] : settings()) {
    // With a plugin the built-in models' keys are unused, and so are the other mode's keys; refused
    // when set, they are kept as comments.
    const Field* f = schema_field(key);
    const bool unused = (!model.plugin.empty() && f && f->built_in_model) || unused_by_mode(key, job.mode);
    out += (unused ? "# " : "") + key + " = " + value + "\n";
  }
  return out;
}

uint64_t Config::fingerprint() const { return fnv1a64(canonical()); }

std::string Config::written(const std::string& key, const std::string& value) const {
  return key == "optimizer.lr" && optimizer.lr_auto_written ? std::string("\"auto\"") : value;
}

uint64_t Config::model_fingerprint() const {
  std::string out;
  for (const auto& [key, value] : settings()) {
    const std::string section = key.substr(0, key.find('.'));  // model.params.* are in "model"
    // model.layout is how W is kept in memory, not what is learned: files hold W in one order, so
    // a checkpoint resumes in either layout.
    if (key == "model.layout") continue;
    if (section == "job" || section == "data" || section == "model" || section == "optimizer")
      out += key + "=" + written(key, value) + "\n";
  }
  return fnv1a64(out);
}

uint64_t Config::cnn_fingerprint() const {
  std::string out;
  for (const auto& [key, value] : settings()) {
    const std::string section = key.substr(0, key.find('.'));
    if (key == "job.seed" || section == "data" || section == "optimizer" || key == "cnn.layers" || key == "cnn.input" ||
        key == "cnn.momentum" || key == "cnn.weight_decay")
      out += key + "=" + written(key, value) + "\n";
  }
  return fnv1a64(out);
}

Config parse_config(const std::string& toml_text, const std::string& name, const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(std::string_view(toml_text), std::string_view(name));
  } catch (const toml::parse_error& e) {
    throw InvalidArgument(fmt::format("{}:{}: TOML syntax error: {}", name, e.source().begin.line, e.description()));
  }
  return build(std::move(root), name, overrides);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  SFB_CHECK(!std::filesystem::is_directory(path, ec), "{}: is a directory, not a config file", path);
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    if (e.source().begin.line == 0 || !e.source().path)
      throw InvalidArgument(fmt::format("{}: cannot read config: {}", path, e.description()));
    throw InvalidArgument(fmt::format("{}:{}: TOML syntax error: {}", path, e.source().begin.line, e.description()));
  }
  return build(std::move(root), path, overrides);
}

std::string config_value(const Config& cfg, const std::string& key) {
  for (const auto& f : schema())
    if (f.key == key) return f.show(cfg);
  return {};
}

std::vector<ConfigKeyDoc> config_key_docs() {
  const Config defaults;
  std::vector<ConfigKeyDoc> docs;
  for (const auto& f : schema())
    docs.push_back({f.key, f.type, f.show(defaults), f.help, f.mode ? std::string(name(*f.mode)) : ""});
  return docs;
}

}  // namespace sfb
