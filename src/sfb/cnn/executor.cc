#include "sfb/cnn/executor.h"

#include <bit>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sfb/cnn/cuda/cuda_backend.h"
#include "sfb/cnn/onednn_layers.h"
#include "sfb/cnn/replanner.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/core/rng.h"
#include "sfb/core/timer.h"
#include "sfb/io/sampler.h"

namespace sfb::cnn {
namespace {

Shape parse_shape(const std::string& s) {
  Shape sh;
  char x1 = 0, x2 = 0;
  std::istringstream is(s);
  if (!(is >> sh.c >> x1 >> sh.h >> x2 >> sh.w) || x1 != 'x' || x2 != 'x' || sh.c < 1 || sh.h < 1 || sh.w < 1)
    throw InvalidArgument(fmt::format("cnn.input must be <channels>x<height>x<width>, got \"{}\"", s));
  return sh;
}

// cnn.input, checked against the data (dense, D = input size).
Shape checked_input(const CnnConfig& cfg, const io::Dataset& train) {
  const Shape input = parse_shape(cfg.input);
  SFB_CHECK(train.dim == input.size() && !train.sparse,
            "job.mode = \"mgwfbp\": the data has {} {} features per row, cnn.input {} needs {} dense features{}",
            train.dim, train.sparse ? "sparse" : "dense", cfg.input, input.size(),
            train.dim == input.size() + 1 ? " (set data.bias = false)" : "");
  return input;
}

// SGD with momentum and weight decay on the averaged gradients; one velocity per parameter matrix.
class MomentumSgd {
 public:
  MomentumSgd(Network& net, const CnnConfig& cfg) : net_(net), momentum_(cfg.momentum), decay_(cfg.weight_decay) {
    for (int p = 0; p < net.param_layers(); ++p) {
      velocity_.emplace_back();
      for (Matrix* m : net.param_layer(p).params()) velocity_.back().push_back(Matrix::Zero(m->rows(), m->cols()));
    }
  }
  // v = momentum v + g + decay w; w -= lr v, in one pass over w, g and v (the step streams every
  // parameter: with several ranks per host, memory bandwidth is what it costs). False when a
  // weight is no longer finite afterwards (checked in the same pass).
  bool step(float lr) {
    const auto mom = static_cast<float>(momentum_), dec = static_cast<float>(decay_);
    bool finite = true;
    for (int p = 0; p < net_.param_layers(); ++p) {
      auto& layer = net_.param_layer(p);
      const auto ps = layer.params();
      const auto gs = layer.grads();
      for (size_t k = 0; k < ps.size(); ++k) {
        float* w = ps[k]->data();
        const float* g = gs[k]->data();
        float* v = velocity_[static_cast<size_t>(p)][k].data();
        uint32_t nonfinite = 0;  // an exponent of all ones: inf or NaN (an integer test, vectorised)
        for (Eigen::Index i = 0, n = ps[k]->size(); i < n; ++i) {
          v[i] = mom * v[i] + g[i] + dec * w[i];
          w[i] -= lr * v[i];
          nonfinite |= (std::bit_cast<uint32_t>(w[i]) & 0x7f800000u) == 0x7f800000u;
        }
        finite = finite && nonfinite == 0;
      }
    }
    net_.params_changed();
    return finite;
  }
  // The momentum buffers in the file order (cnn_file.h), and back.
  std::vector<float> velocity() const {
    std::vector<float> out;
    for (const auto& layer : velocity_)
      for (const auto& m : layer) out.insert(out.end(), m.data(), m.data() + m.size());
    return out;
  }
  void set_velocity(std::span<const float> v) {
    size_t at = 0;
    for (auto& layer : velocity_)
      for (auto& m : layer) {
        SFB_CHECK_DATA(at + static_cast<size_t>(m.size()) <= v.size(), "{} momentum values are too few", v.size());
        std::copy_n(v.data() + at, m.size(), m.data());
        at += static_cast<size_t>(m.size());
      }
    SFB_CHECK_DATA(at == v.size(), "{} momentum values for {} parameters", v.size(), at);
  }

 private:
  Network& net_;
  double momentum_, decay_;
  std::vector<std::vector<Matrix>> velocity_;
};

// This rank's minibatch (`rows` of `data`) into x and labels.
void load_batch(const io::Dataset& data, const std::vector<int64_t>& rows, Matrix& x, std::vector<int32_t>& labels) {
  x.resize(static_cast<int64_t>(rows.size()), data.dim);
  labels.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    x.row(static_cast<int64_t>(i)) = data.dense.row(rows[i]);
    labels[i] = data.labels[static_cast<size_t>(rows[i])];
  }
}

}  // namespace

Network make_network(const CnnConfig& cfg, const io::Dataset& train) {
  const Shape input = checked_input(cfg, train);
  Network net(cfg.layers, input, parse_kernels(std::string(name(cfg.kernels))));
  const int64_t outputs = net.layer(net.layers() - 1).out_shape().size();
  SFB_CHECK(outputs >= train.classes, "cnn.layers ends with {} outputs but the data has {} classes", outputs,
            train.classes);
  return net;
}

MemoryEstimate cnn_memory(const Config& cfg, const io::Dataset& train) {
  // From the spec alone: an estimate that allocated the network would fail where it should warn.
  const Shape input = checked_input(cfg.cnn, train);
  const double batch = static_cast<double>(cfg.optimizer.minibatch);
  double acts = static_cast<double>(input.size()), cols = 0, params = 0;
  for (const LayerInfo& li : Network::plan(cfg.cnn.layers, input)) {
    acts += static_cast<double>(li.out.size());
    params += static_cast<double>(Network::param_count(li));
    if (li.kind == LayerInfo::Kind::kConv)
      cols += static_cast<double>(li.in.c) * li.kernel * li.kernel * li.out.h * li.out.w;
  }
  MemoryEstimate e;
  e.add("parameters, gradients and momentum", "cnn.layers", 4.0 * 3 * params);
  e.add("activations and their gradients", "cnn.layers, optimizer.minibatch", 4.0 * 2 * acts * batch);
  e.add("the convolutions' im2col buffers", "cnn.layers, optimizer.minibatch", 4.0 * cols * batch);
  return e;
}

bool params_finite(Network& net) {
  for (int p = 0; p < net.param_layers(); ++p)
    for (Matrix* m : net.param_layer(p).params())
      if (!m->allFinite()) return false;
  return true;
}

TestResult evaluate(Network& net, const io::Dataset& test) {
  TestResult res;
  if (test.n <= 0) return res;
  int64_t right = 0;
  double loss = 0;
  Matrix tx;
  std::vector<int32_t> labels;
  for (int64_t b = 0; b < test.n; b += 1000) {
    const int64_t e = std::min(test.n, b + 1000);
    tx = test.dense.middleRows(b, e - b);
    labels.assign(test.labels.begin() + b, test.labels.begin() + e);
    const Matrix& logits = net.forward(tx);
    loss += softmax_cross_entropy(logits, labels, nullptr) * static_cast<double>(e - b);
    for (int64_t i = b; i < e; ++i) {
      Eigen::Index arg = 0;
      logits.row(i - b).maxCoeff(&arg);
      right += arg == test.labels[static_cast<size_t>(i)];
    }
  }
  res.loss = loss / static_cast<double>(test.n);
  res.accuracy = static_cast<double>(right) / static_cast<double>(test.n);
  return res;
}

CnnFile model_file(const Config& cfg, int ranks, const ExecutorResult& r) {
  CnnFile f;
  f.fingerprint = cfg.cnn_fingerprint();
  f.seed = cfg.job.seed;
  f.iteration = r.iterations_done;
  f.ranks = ranks;
  f.network = r.network;
  f.params = r.params;
  return f;
}

Executor::Executor(const Config& cfg, comm::Transport& transport, const io::Dataset& train, const io::Dataset* test,
                   ExecutorHooks hooks, int local_rank, ExecutorStart start)
    : cfg_(cfg),
      t_(transport),
      train_(train),
      test_(test),
      hooks_(std::move(hooks)),
      local_rank_(local_rank),
      start_(start) {
  t_.set_peer_timeout(cfg.runtime.peer_timeout_s);  // every all-reduce and collective waits at most this long
}

namespace {

// The CUDA backend when job.device = "cuda"; rank 0 logs where the layers run and the network.
void place_layers(const Config& cfg, Network& net, int local_rank, bool log) {
  if (cfg.job.device == sfb::Device::kCuda) {
    net.set_backend(cuda::make_backend(net, local_rank));
    if (log) spdlog::info("layers run on CUDA ({})", cuda::library_versions());
  } else if (log) {
    spdlog::info("layers run on the CPU: {}",
                 cfg.cnn.kernels == sfb::CnnKernels::kOnednn ? onednn_info() : "reference kernels");
  }
  if (log)
    spdlog::info("network: {} ({} parameters in {} layers with parameters)", net.describe(), net.total_params(),
                 net.param_layers());
}

// The weights, momentum and iteration training starts from (ExecutorStart); the iteration.
int64_t restore(const ExecutorStart& start, Network& net, MomentumSgd& sgd, const std::string& input) {
  const CnnFile* from = start.checkpoint ? start.checkpoint : start.init;
  if (!from) return 0;
  check_same_network(from->network, network_spec(net, input), start.checkpoint ? "--resume" : "model.init");
  set_params(net, from->params, "the weights");
  if (!start.checkpoint) return 0;
  sgd.set_velocity(from->velocity);
  return from->iteration;
}

// The network of cnn.layers with the seeded initial weights (the same on every rank).
Network initial_network(const Config& cfg, const io::Dataset& train) {
  Network net = make_network(cfg.cnn, train);
  Rng init_rng = make_rng(cfg.job.seed, 0xC44);
  net.init(init_rng);
  return net;
}

// The weights training starts from (restore), then the layers on their device; the iteration.
int64_t start_from(const ExecutorStart& start, const Config& cfg, Network& net, MomentumSgd& sgd, int local_rank,
                   bool log) {
  const int64_t first = restore(start, net, sgd, cfg.cnn.input);
  place_layers(cfg, net, local_rank, log);
  return first;
}

// The state after `done` iterations, as a checkpoint (rank 0).
CnnFile snapshot(const Config& cfg, int ranks, Network& net, const MomentumSgd& sgd, int64_t done,
                 const Replanner& planner, bool profiling) {
  CnnFile f;
  f.checkpoint = true;
  f.fingerprint = cfg.cnn_fingerprint();
  f.seed = cfg.job.seed;
  f.iteration = done;
  f.ranks = ranks;
  f.network = network_spec(net, cfg.cnn.input);
  f.params = get_params(net);
  f.velocity = sgd.velocity();
  f.lr = cfg.optimizer.lr_auto_written ? cfg.optimizer.lr : 0;  // a resumed "auto" run reuses it
  if (!profiling && planner.profile().size() > 0) f.plan = PlanState{planner.plan(), planner.cost(), planner.profile()};
  return f;
}

// checkpoint.path, written atomically by rank 0; a failure (full disk) is logged, training goes on.
void write_checkpoint(const Config& cfg, const CnnFile& f, int64_t& last_written) {
  const auto path = cfg.output.path(cfg.checkpoint.path);
  try {
    write_cnn_file(path, f);
  } catch (const Error& e) {
    spdlog::error("checkpoint at iteration {} not written: {}; {}; training continues", f.iteration, e.what(),
                  last_written >= 0 ? fmt::format("{} keeps iteration {}", path, last_written)
                                    : std::string("this run has written no checkpoint yet"));
    return;
  }
  last_written = f.iteration;
  spdlog::info("checkpoint at iteration {} written to {}", f.iteration, path);
}

// One iteration's work on this rank: batch, forward, backward with the groups' collectives,
// the update; false when the weights stopped being finite.
struct Step {
  Network& net;
  GradientCommunicator& comm;
  Replanner& planner;
  MomentumSgd& sgd;
  std::vector<int64_t> rows;
  Matrix x;
  std::vector<int32_t> labels;
  std::vector<double> layer_us;
  SteadyClock::time_point start;
  double to_backward_end_us = 0;

  bool run(const Config& cfg, const io::Dataset& train, int64_t it, IterationStats& st) {
    load_batch(train, rows, x, labels);
    start = comm.begin(it, planner.plan(), planner.link_cost());
    net.forward(x);
    const auto t1 = SteadyClock::now();
    st.loss = net.backward(
        labels, [this](int p) { comm.ready(p); }, &layer_us);
    const auto t2 = SteadyClock::now();
    comm.wait();
    const auto t3 = SteadyClock::now();
    if (!sgd.step(static_cast<float>(cfg.optimizer.step(it)))) return false;
    st.iteration = it;
    st.forward_us = us_since(start, t1);
    st.backward_us = us_since(t1, t2);
    st.comm_wait_us = us_since(t2, t3);
    st.iteration_us = us_since(start, SteadyClock::now());
    st.predicted_us = planner.profiling(it) ? 0.0 : planner.predicted_us();
    to_backward_end_us = us_since(start, t3);
    return true;
  }
};

void fill_result(ExecutorResult& res, Network& net, const MomentumSgd& sgd, const Replanner& planner, int64_t done,
                 const std::string& input) {
  res.iterations_done = done;
  res.network = network_spec(net, input);
  res.params = get_params(net);
  res.velocity = sgd.velocity();
  res.checksum = fnv1a64(std::as_bytes(std::span(res.params.data(), res.params.size())));
  res.plan = planner.plan();
  res.cost = planner.cost();
  res.profile = planner.profile();
  res.predictions = planner.predictions();
  res.replans = planner.replans();
}

}  // namespace

// One call of Executor::run on the training thread: the start (the constructor: the network and
// the weights it starts from, the communicator, the planner, the log), one iteration at a time,
// and the finish (the final evaluation and checkpoint, the result). It owns everything the run
// builds, and ends the communication thread when it goes.
class Executor::Run {
 public:
  explicit Run(const Executor& ex);
  int64_t first() const { return first_; }
  // Iteration `it` and what follows it (trace, evaluation, checkpoint, the ranks' stop check);
  // false when training stops after it (the weights diverged, or a rank was signalled).
  bool iteration(int64_t it);
  ExecutorResult finish();

 private:
  bool diverged(int64_t it, double loss);
  void after(int64_t it, const IterationStats& st, const std::vector<GroupRecord>& groups);
  bool signalled();
  void evaluate_into_result();

  const Executor& ex_;
  const Config& cfg_;
  const int rank_;
  const int64_t iters_;
  Network net_;
  MomentumSgd sgd_;
  const int64_t first_;
  GradientCommunicator comm_;
  Replanner planner_;
  std::optional<RunLog> log_;  // made once the planner has resumed (it may refuse the checkpoint)
  io::EpochSampler sampler_;
  Step step_;
  std::vector<std::string> names_, param_labels_;
  ExecutorResult res_;
  const bool checkpoints_;
  int64_t done_, last_checkpoint_ = -1;
  int64_t planned_at_ = -1;    // the first iteration with a plan
  int64_t evaluated_at_ = -1;  // the iteration res_.test_* belong to
  Stopwatch total_;
};

Executor::Run::Run(const Executor& ex)
    : ex_(ex),
      cfg_(ex.cfg_),
      rank_(ex.t_.rank()),
      iters_(cfg_.stop.max_clocks),
      net_(initial_network(cfg_, ex.train_)),
      sgd_(net_, cfg_.cnn),
      first_(start_from(ex.start_, cfg_, net_, sgd_, ex.local_rank_, rank_ == 0)),
      comm_(ex.t_, net_, ex.hooks_.on_allreduce, ex.hooks_.allreduce),
      planner_(cfg_.mgwfbp, ex.t_, net_, cfg_.optimizer.minibatch, ex.hooks_.plan, ex.hooks_.allreduce),
      sampler_(ex.train_.n, cfg_.job.seed, static_cast<uint64_t>(rank_)),
      step_{net_, comm_, planner_, sgd_, {}, {}, {}, {}, {}, 0},
      checkpoints_(rank_ == 0 && !cfg_.checkpoint.path.empty()),
      done_(first_) {
  const CnnFile* ck = ex.start_.checkpoint;
  planner_.resume_at(first_, ck && ck->ranks == ex.t_.size() && ck->plan ? &*ck->plan : nullptr);
  log_.emplace(cfg_.output, cfg_.eval.every, iters_, rank_, first_);
  if (!ex.hooks_.batch) sampler_.skip(first_ * cfg_.optimizer.minibatch);  // where an uninterrupted run would be
  res_.start_iteration = first_;
  res_.stop_reason = StopReason::kMaxClocks;
  for (int i = 0; i < net_.layers(); ++i) names_.push_back(net_.layer_label(i));
  for (int p = 0; p < net_.param_layers(); ++p) param_labels_.push_back(net_.param_label(p));
  if (first_ > 0 && !planner_.profiling(first_)) planned_at_ = first_;
  total_.reset();
}

bool Executor::Run::iteration(int64_t it) {
  if (planner_.before_iteration(it) && planned_at_ < 0) planned_at_ = it;
  if (ex_.hooks_.batch)
    ex_.hooks_.batch(it, step_.rows);
  else
    sampler_.next(cfg_.optimizer.minibatch, step_.rows);
  IterationStats st;
  if (!step_.run(cfg_, ex_.train_, it, st)) return diverged(it, st.loss);
  done_ = it + 1;
  const auto groups = comm_.group_records();
  for (const auto& g : groups) st.bytes_sent += g.bytes_sent;
  res_.iterations.push_back(st);
  planner_.record(it, st.forward_us, step_.layer_us, st.backward_us);
  after(it, res_.iterations.back(), groups);
  if (!signalled()) return true;
  res_.stop_reason = StopReason::kSignal;
  return false;
}

bool Executor::Run::diverged(int64_t it, double loss) {
  res_.diverged_at = it;
  res_.stop_reason = StopReason::kDiverged;
  spdlog::error("the weights are no longer finite after iteration {} (loss {}): training diverged", it + 1, loss);
  return false;
}

// After iteration `it` (`st` in the result): its trace, rank 0's evaluation and report, the
// checkpoint.
void Executor::Run::after(int64_t it, const IterationStats& st, const std::vector<GroupRecord>& groups) {
  if (log_->traces(it, planned_at_))
    log_->trace(
        {step_.start, &st, step_.to_backward_end_us, &step_.layer_us, names_, param_labels_, groups, &planner_.plan()});
  if (rank_ == 0 && (done_ % cfg_.eval.every == 0 || done_ == iters_)) {
    evaluate_into_result();
    evaluated_at_ = done_;
    log_->report(it, st.loss, {res_.test_loss, res_.test_accuracy}, res_.iterations, planner_.predicted_us(),
                 total_.seconds());
  }
  if (checkpoints_ && cfg_.checkpoint.every > 0 && done_ % cfg_.checkpoint.every == 0)
    write_checkpoint(cfg_, snapshot(cfg_, ex_.t_.size(), net_, sgd_, done_, planner_, planner_.profiling(it)),
                     last_checkpoint_);
}

ExecutorResult Executor::Run::finish() {
  // A run stopped between evaluations (a signal) reports the weights it saves, not older ones.
  if (rank_ == 0 && res_.diverged_at < 0 && done_ > first_ && evaluated_at_ != done_) {
    evaluate_into_result();
    log_->report(done_ - 1, res_.iterations.back().loss, {res_.test_loss, res_.test_accuracy}, res_.iterations,
                 planner_.predicted_us(), total_.seconds());
  }
  // The final state, unless it diverged (the last good checkpoint stays) or was just written.
  if (checkpoints_ && res_.diverged_at < 0 && last_checkpoint_ != done_)
    write_checkpoint(cfg_, snapshot(cfg_, ex_.t_.size(), net_, sgd_, done_, planner_, planner_.profiling(done_ - 1)),
                     last_checkpoint_);
  res_.seconds = total_.seconds();
  fill_result(res_, net_, sgd_, planner_, done_, cfg_.cnn.input);
  res_.bytes_sent = ex_.t_.total_counters().bytes_sent;
  log_->finish(ex_.t_);
  return std::move(res_);
}

// Whether any rank was signalled after the iterations done (every rank learns it at the same
// iteration: the check is collective every kStopCheckEvery iterations).
bool Executor::Run::signalled() {
  const auto& stop_signal = ex_.hooks_.stop_signal;
  if (!stop_signal || done_ % kStopCheckEvery != 0 || done_ >= iters_) return false;
  int64_t sig = 0;
  for (int64_t v : comm::allgather_i64(ex_.t_, stop_signal())) sig = std::max(sig, v);
  if (sig != 0 && rank_ == 0) spdlog::warn("stopping after iteration {}: signal {}", done_, sig);
  return sig != 0;
}

// Rank 0: the test loss and accuracy of the network into the result (unchanged without a test set).
void Executor::Run::evaluate_into_result() {
  if (!ex_.test_ || ex_.test_->n == 0) return;
  const TestResult tr = evaluate(net_, *ex_.test_);
  res_.test_loss = tr.loss;
  res_.test_accuracy = tr.accuracy;
}

ExecutorResult Executor::run() {
  Run run(*this);
  for (int64_t it = run.first(); it < cfg_.stop.max_clocks; ++it)
    if (!run.iteration(it)) break;
  return run.finish();
}

}  // namespace sfb::cnn
