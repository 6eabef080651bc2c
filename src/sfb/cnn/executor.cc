#include "sfb/cnn/executor.h"

#include <bit>
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

// This rank's minibatch of iteration `it` into x and labels.
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

}  // namespace

namespace {

// The weights, momentum and iteration training starts from (start.h); the iteration.
int64_t restore(const ExecutorStart& start, Network& net, MomentumSgd& sgd, const std::string& input) {
  const CnnFile* from = start.checkpoint ? start.checkpoint : start.init;
  if (!from) return 0;
  check_same_network(from->network, network_spec(net, input), start.checkpoint ? "--resume" : "model.init");
  set_params(net, from->params, "the weights");
  if (!start.checkpoint) return 0;
  sgd.set_velocity(from->velocity);
  return from->iteration;
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

// Whether any rank was signalled (every rank learns it at the same iteration).
bool Executor::signalled(int64_t done, int64_t iters) {
  if (!hooks_.stop_signal || done % kStopCheckEvery != 0 || done >= iters) return false;
  int64_t sig = 0;
  for (int64_t v : comm::allgather_i64(t_, hooks_.stop_signal())) sig = std::max(sig, v);
  if (sig != 0 && t_.rank() == 0) spdlog::warn("stopping after iteration {}: signal {}", done, sig);
  return sig != 0;
}

void Executor::evaluate_into(Network& net, ExecutorResult& res) const {
  if (!test_ || test_->n == 0) return;
  const TestResult tr = evaluate(net, *test_);
  res.test_loss = tr.loss;
  res.test_accuracy = tr.accuracy;
}

ExecutorResult Executor::run() {
  const int rank = t_.rank();
  Network net = make_network(cfg_.cnn, train_);
  Rng init_rng = make_rng(cfg_.job.seed, 0xC44);  // the same initial weights on every rank
  net.init(init_rng);
  MomentumSgd sgd(net, cfg_.cnn);
  const int64_t first = restore(start_, net, sgd, cfg_.cnn.input);
  place_layers(cfg_, net, local_rank_, rank == 0);
  GradientCommunicator comm(t_, net, hooks_.on_allreduce, hooks_.allreduce);
  Replanner planner(cfg_.mgwfbp, t_, net, cfg_.optimizer.minibatch, hooks_.plan, hooks_.allreduce);
  const CnnFile* ck = start_.checkpoint;
  planner.resume_at(first, ck && ck->ranks == t_.size() && ck->plan ? &*ck->plan : nullptr);
  RunLog log(cfg_.output, cfg_.eval.every, cfg_.stop.max_clocks, rank, first);
  io::EpochSampler sampler(train_.n, cfg_.job.seed, static_cast<uint64_t>(rank));
  if (!hooks_.batch) sampler.skip(first * cfg_.optimizer.minibatch);  // where an uninterrupted run would be
  ExecutorResult res;
  res.start_iteration = first;
  res.stop_reason = "iterations";
  int64_t done = first, last_checkpoint = -1;
  const bool checkpoints = rank == 0 && !cfg_.checkpoint.path.empty();
  Step step{net, comm, planner, sgd, {}, {}, {}, {}, {}, 0};
  std::vector<std::string> names, param_labels;
  for (int i = 0; i < net.layers(); ++i) names.push_back(net.layer_label(i));
  for (int p = 0; p < net.param_layers(); ++p) param_labels.push_back(net.param_label(p));
  int64_t planned_at = first > 0 && !planner.profiling(first) ? first : -1;  // the first iteration with a plan
  Stopwatch total;
  const int64_t iters = cfg_.stop.max_clocks;
  int64_t evaluated_at = -1;  // the iteration res.test_* belong to
  for (int64_t it = first; it < iters; ++it) {
    if (planner.before_iteration(it) && planned_at < 0) planned_at = it;
    if (hooks_.batch)
      hooks_.batch(it, step.rows);
    else
      sampler.next(cfg_.optimizer.minibatch, step.rows);
    IterationStats st;
    if (!step.run(cfg_, train_, it, st)) {
      res.diverged_at = it;
      res.stop_reason = "diverged";
      spdlog::error("the weights are no longer finite after iteration {} (loss {}): training diverged", it + 1,
                    st.loss);
      break;
    }
    done = it + 1;
    const auto groups = comm.group_records();
    for (const auto& g : groups) st.bytes_sent += g.bytes_sent;
    res.iterations.push_back(st);
    planner.record(it, st.forward_us, step.layer_us, st.backward_us);
    if (log.traces(it, planned_at))
      log.trace({step.start, &res.iterations.back(), step.to_backward_end_us, &step.layer_us, names, param_labels,
                 groups, &planner.plan()});
    if (rank == 0 && (done % cfg_.eval.every == 0 || done == iters)) {
      evaluate_into(net, res);
      evaluated_at = done;
      log.report(it, st.loss, {res.test_loss, res.test_accuracy}, res.iterations, planner.predicted_us(),
                 total.seconds());
    }
    if (checkpoints && cfg_.checkpoint.every > 0 && done % cfg_.checkpoint.every == 0)
      write_checkpoint(cfg_, snapshot(cfg_, t_.size(), net, sgd, done, planner, planner.profiling(it)),
                       last_checkpoint);
    if (signalled(done, iters)) {
      res.stop_reason = "signal";
      break;
    }
  }
  // A run stopped between evaluations (a signal) reports the weights it saves, not older ones.
  if (rank == 0 && res.diverged_at < 0 && done > first && evaluated_at != done) {
    evaluate_into(net, res);
    log.report(done - 1, res.iterations.back().loss, {res.test_loss, res.test_accuracy}, res.iterations,
               planner.predicted_us(), total.seconds());
  }
  // The final state, unless it diverged (the last good checkpoint stays) or was just written.
  if (checkpoints && res.diverged_at < 0 && last_checkpoint != done)
    write_checkpoint(cfg_, snapshot(cfg_, t_.size(), net, sgd, done, planner, planner.profiling(done - 1)),
                     last_checkpoint);
  res.seconds = total.seconds();
  fill_result(res, net, sgd, planner, done, cfg_.cnn.input);
  res.bytes_sent = t_.total_counters().bytes_sent;
  log.finish(t_);
  return res;
}

}  // namespace sfb::cnn
