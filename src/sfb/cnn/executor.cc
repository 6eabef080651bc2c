#include "sfb/cnn/executor.h"

#include <bit>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sfb/cnn/cuda/cuda_backend.h"
#include "sfb/cnn/onednn_layers.h"
#include "sfb/cnn/replanner.h"
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

// SGD with momentum and weight decay on the averaged gradients; one velocity per parameter matrix.
class MomentumSgd {
 public:
  MomentumSgd(Network& net, const CnnConfig& cfg) : net_(net), momentum_(cfg.momentum), decay_(cfg.weight_decay) {
    for (int p = 0; p < net.param_layers(); ++p) {
      velocity_.emplace_back();
      for (Matrix* m : net.layer(net.param_layer_index(p)).params())
        velocity_.back().push_back(Matrix::Zero(m->rows(), m->cols()));
    }
  }
  // v = momentum v + g + decay w; w -= lr v, in one pass over w, g and v (the step streams every
  // parameter: with several ranks per host, memory bandwidth is what it costs). False when a
  // weight is no longer finite afterwards (checked in the same pass).
  bool step(float lr) {
    const auto mom = static_cast<float>(momentum_), dec = static_cast<float>(decay_);
    bool finite = true;
    for (int p = 0; p < net_.param_layers(); ++p) {
      auto& layer = net_.layer(net_.param_layer_index(p));
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
  const Shape input = parse_shape(cfg.input);
  SFB_CHECK(train.dim == input.size() && !train.sparse,
            "job.mode = \"mgwfbp\": the data has {} {} features per row, cnn.input {} needs {} dense features{}",
            train.dim, train.sparse ? "sparse" : "dense", cfg.input, input.size(),
            train.dim == input.size() + 1 ? " (set data.bias = false)" : "");
  Network net(cfg.layers, input, parse_kernels(cfg.kernels));
  const int64_t outputs = net.layer(net.layers() - 1).out_shape().size();
  SFB_CHECK(outputs >= train.classes, "cnn.layers ends with {} outputs but the data has {} classes", outputs,
            train.classes);
  return net;
}

MemoryEstimate cnn_memory(const Config& cfg, const io::Dataset& train) {
  Network net = make_network(cfg.cnn, train);
  const double batch = static_cast<double>(cfg.optimizer.minibatch);
  double acts = static_cast<double>(net.layer(0).in_shape().size()), cols = 0;
  for (int i = 0; i < net.layers(); ++i) {
    const LayerInfo li = net.layer(i).info();
    acts += static_cast<double>(li.out.size());
    if (li.kind == LayerInfo::Kind::kConv)
      cols += static_cast<double>(li.in.c) * li.kernel * li.kernel * li.out.h * li.out.w;
  }
  MemoryEstimate e;
  e.add("parameters, gradients and momentum", "cnn.layers", 4.0 * 3 * static_cast<double>(net.total_params()));
  e.add("activations and their gradients", "cnn.layers, optimizer.minibatch", 4.0 * 2 * acts * batch);
  e.add("the convolutions' im2col buffers", "cnn.layers, optimizer.minibatch", 4.0 * cols * batch);
  return e;
}

bool params_finite(Network& net) {
  for (int p = 0; p < net.param_layers(); ++p)
    for (Matrix* m : net.layer(net.param_layer_index(p)).params())
      if (!m->allFinite()) return false;
  return true;
}

double test_accuracy(Network& net, const io::Dataset& test) {
  int64_t right = 0;
  Matrix tx;
  for (int64_t b = 0; b < test.n; b += 1000) {
    const int64_t e = std::min(test.n, b + 1000);
    tx = test.dense.middleRows(b, e - b);
    const auto pred = net.predict(tx);
    for (int64_t i = b; i < e; ++i) right += pred[static_cast<size_t>(i - b)] == test.labels[static_cast<size_t>(i)];
  }
  return test.n > 0 ? static_cast<double>(right) / static_cast<double>(test.n) : -1.0;
}

Executor::Executor(const Config& cfg, comm::Transport& transport, const io::Dataset& train, const io::Dataset* test,
                   ExecutorHooks hooks, int local_rank)
    : cfg_(cfg), t_(transport), train_(train), test_(test), hooks_(std::move(hooks)), local_rank_(local_rank) {
  t_.set_peer_timeout(cfg.runtime.peer_timeout_s);  // every all-reduce and collective waits at most this long
}

namespace {

// The CUDA backend when job.device = "cuda"; rank 0 logs where the layers run and the network.
void place_layers(const Config& cfg, Network& net, int local_rank, bool log) {
  if (cfg.job.device == "cuda") {
    net.set_backend(cuda::make_backend(net, local_rank));
    if (log) spdlog::info("layers run on CUDA ({})", cuda::library_versions());
  } else if (log) {
    spdlog::info("layers run on the CPU: {}", cfg.cnn.kernels == "onednn" ? onednn_info() : "reference kernels");
  }
  if (log)
    spdlog::info("network: {} ({} parameters in {} layers with parameters)", net.describe(), net.total_params(),
                 net.param_layers());
}

}  // namespace

ExecutorResult Executor::run() {
  const int rank = t_.rank();
  Network net = make_network(cfg_.cnn, train_);
  Rng init_rng = make_rng(cfg_.job.seed, 0xC44);  // the same initial weights on every rank
  net.init(init_rng);
  place_layers(cfg_, net, local_rank_, rank == 0);
  GradientCommunicator comm(t_, net, hooks_.on_allreduce, hooks_.allreduce);
  Replanner planner(cfg_.mgwfbp, t_, net, comm, cfg_.optimizer.minibatch, hooks_.plan, hooks_.allreduce);
  MomentumSgd sgd(net, cfg_.cnn);
  RunLog log(cfg_.output, cfg_.eval.every, cfg_.stop.max_clocks, rank);
  io::EpochSampler sampler(train_.n, cfg_.job.seed, static_cast<uint64_t>(rank));
  ExecutorResult res;
  std::vector<int64_t> rows;
  Matrix x;
  std::vector<int32_t> labels;
  std::vector<double> layer_us;
  int64_t planned_at = -1;  // the first iteration with a plan from profiling
  Stopwatch total;
  const int64_t iters = cfg_.stop.max_clocks;
  for (int64_t it = 0; it < iters; ++it) {
    if (planner.before_iteration(it) && planned_at < 0) planned_at = it;
    if (hooks_.batch)
      hooks_.batch(it, rows);
    else
      sampler.next(cfg_.optimizer.minibatch, rows);
    load_batch(train_, rows, x, labels);
    const auto t0 = comm.begin(it, planner.plan());
    net.forward(x);
    const auto t1 = SteadyClock::now();
    const double loss = net.backward(
        labels, [&comm](int p) { comm.ready(p); }, &layer_us);
    const auto t2 = SteadyClock::now();
    comm.wait();
    const auto t3 = SteadyClock::now();
    if (!sgd.step(static_cast<float>(cfg_.optimizer.step(it)))) {
      res.diverged_at = it;
      spdlog::error("the weights are no longer finite after iteration {} (loss {}): training diverged", it + 1, loss);
      break;
    }
    IterationStats& st = res.iterations.emplace_back();
    st = {it,
          us_since(t0, t1),
          us_since(t1, t2),
          us_since(t2, t3),
          us_since(t0, SteadyClock::now()),
          planner.profiling(it) ? 0.0 : planner.predicted_us(),
          loss};
    const auto groups = comm.group_records();
    for (const auto& g : groups) st.bytes_sent += g.bytes_sent;
    planner.record(it, st.forward_us, layer_us, st.backward_us);
    if (log.traces(it, planned_at)) {
      std::vector<std::string> names;
      for (int i = 0; i < net.layers(); ++i) names.push_back(net.layer(i).name());
      log.trace({t0, &st, us_since(t0, t3), &layer_us, names, groups, &planner.plan()});
    }
    if (rank == 0 && ((it + 1) % cfg_.eval.every == 0 || it + 1 == iters)) {
      if (test_ && test_->n > 0) res.test_accuracy = test_accuracy(net, *test_);
      log.report(it, loss, res.test_accuracy, res.iterations, planner.predicted_us(), total.seconds());
    }
  }
  res.seconds = total.seconds();
  for (int p = 0; p < net.param_layers(); ++p)
    for (Matrix* m : net.layer(net.param_layer_index(p)).params())
      res.params.insert(res.params.end(), m->data(), m->data() + m->size());
  res.checksum = fnv1a64(std::as_bytes(std::span(res.params.data(), res.params.size())));
  res.bytes_sent = t_.total_counters().bytes_sent;
  res.plan = planner.plan();
  res.cost = planner.cost();
  res.profile = planner.profile();
  res.predictions = planner.predictions();
  res.replans = planner.replans();
  log.finish();
  return res;
}

}  // namespace sfb::cnn
