#include "sfb/mgwfbp/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sfb/comm/collectives.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/hash.h"
#include "sfb/core/rng.h"
#include "sfb/core/timer.h"
#include "sfb/io/sampler.h"
#include "sfb/mgwfbp/cuda/cuda_backend.h"
#include "sfb/comm/rank_order_allreduce.h"
#include "sfb/mgwfbp/nn/network.h"
#include "sfb/core/bounded_queue.h"

namespace sfb::mgwfbp {
namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t - t0).count();
}

nn::Shape parse_shape(const std::string& s) {
  nn::Shape sh;
  char x1 = 0, x2 = 0;
  std::istringstream is(s);
  if (!(is >> sh.c >> x1 >> sh.h >> x2 >> sh.w) || x1 != 'x' || x2 != 'x' || sh.c < 1 || sh.h < 1 || sh.w < 1)
    throw InvalidArgument(fmt::format("cnn.input must be <channels>x<height>x<width>, got \"{}\"", s));
  return sh;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Chrome trace events (chrome://tracing, Perfetto): one JSON object per event.
struct Trace {
  std::vector<std::string> events;
  void add(const std::string& name, int tid, double ts_us, double dur_us, int pid) {
    events.push_back(fmt::format(R"({{"name": "{}", "ph": "X", "pid": {}, "tid": {}, "ts": {:.1f}, "dur": {:.1f}}})",
                                 name, pid, tid, ts_us, dur_us));
  }
};

// Encodes a plan as int64 words (lo, hi pairs) for the broadcast from rank 0.
std::string encode_plan(const Plan& plan, const CostModel& c) {
  std::string out;
  auto put = [&out](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  put(&c.a_us, 8);
  put(&c.b_us_per_byte, 8);
  for (const auto& g : plan) {
    const int64_t lo = g.lo, hi = g.hi;
    put(&lo, 8);
    put(&hi, 8);
  }
  return out;
}
Plan decode_plan(const comm::Bytes& b, CostModel& c, int layers) {
  if (b.size() < 16 || (b.size() - 16) % 16 != 0) throw CommError(fmt::format("plan broadcast of {} bytes", b.size()));
  std::memcpy(&c.a_us, b.data(), 8);
  std::memcpy(&c.b_us_per_byte, b.data() + 8, 8);
  Plan plan;
  for (size_t o = 16; o < b.size(); o += 16) {
    int64_t lo = 0, hi = 0;
    std::memcpy(&lo, b.data() + o, 8);
    std::memcpy(&hi, b.data() + o + 8, 8);
    plan.push_back({static_cast<int>(lo), static_cast<int>(hi)});
  }
  check_plan(plan, layers);
  return plan;
}

}  // namespace

Executor::Executor(const Config& cfg, comm::Transport& transport, const io::Dataset& train, const io::Dataset* test,
                   ExecutorHooks hooks)
    : cfg_(cfg), t_(transport), train_(train), test_(test), hooks_(std::move(hooks)) {}

ExecutorResult Executor::run() {
  const int rank = t_.rank(), P = t_.size();
  const nn::Shape input = parse_shape(cfg_.cnn.input);
  SFB_CHECK(train_.dim == input.size() && !train_.sparse,
            "job.mode = \"mgwfbp\": the data has {} {} features per row, cnn.input {} needs {} dense features{}",
            train_.dim, train_.sparse ? "sparse" : "dense", cfg_.cnn.input, input.size(),
            train_.dim == input.size() + 1 ? " (set data.bias = false)" : "");
  nn::Network net(cfg_.cnn.layers, input);
  SFB_CHECK(net.layer(net.layers() - 1).out_shape().size() >= train_.classes,
            "cnn.layers ends with {} outputs but the data has {} classes", net.layer(net.layers() - 1).out_shape().size(),
            train_.classes);
  {
    Rng rng = make_rng(cfg_.job.seed, 0xC44);  // the same initial weights on every rank
    net.init(rng);
  }
  if (cfg_.job.device == "cuda") {
    // One GPU per rank on a host: Open MPI's local rank picks it.
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    net.set_backend(cuda::make_backend(net, local ? std::atoi(local) : rank));
    if (rank == 0) spdlog::info("layers run on CUDA");
  }
  const int L = net.param_layers();
  if (rank == 0) spdlog::info("network: {} ({} parameters in {} layers with parameters)", net.describe(), net.total_params(), L);

  // Momentum buffers, one per parameter matrix.
  std::vector<std::vector<Matrix>> velocity(static_cast<size_t>(L));
  for (int p = 0; p < L; ++p)
    for (Matrix* m : net.layer(net.param_layer_index(p)).params())
      velocity[static_cast<size_t>(p)].push_back(Matrix::Zero(m->rows(), m->cols()));

  ExecutorResult res;
  Plan plan = plan_synceasgd(Profile{"init", std::vector<Layer>(static_cast<size_t>(L)), 0.0});
  if (hooks_.plan) plan = *hooks_.plan;
  check_plan(plan, L);
  const int64_t profile_iters = hooks_.plan ? 0 : cfg_.mgwfbp.profile_iters;

  // Communication thread state.
  BoundedQueue<int> ready_q;
  ready_q.set_capacity(1 << 16);
  std::mutex mu;
  std::condition_variable cv;
  int groups_done = 0;
  int64_t comm_iter = -1;  // iteration the communication thread should serve
  bool stop = false;
  std::exception_ptr comm_error;
  std::vector<std::pair<double, double>> group_times;  // (start, end) us since the iteration start
  Clock::time_point iter_start;
  Plan active = plan;  // written by the training thread between iterations, copied under mu by the communication thread
  comm::RankOrderAllreduce allreduce(t_);

  std::thread comm([&] {
    try {
      std::vector<float> buf;
      std::vector<char> ready(static_cast<size_t>(L));
      int64_t served = -1;
      Plan plan_now_serving;  // this iteration's plan: the training thread may re-plan between iterations
      for (;;) {
        int64_t iter;
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return stop || comm_iter > served; });
          if (stop) return;
          iter = comm_iter;
          plan_now_serving = active;
        }
        served = iter;
        std::fill(ready.begin(), ready.end(), 0);
        for (size_t g = 0; g < plan_now_serving.size(); ++g) {
          const Group grp = plan_now_serving[g];
          // Layers become ready in backward order: wait for the group's last-ready layer.
          while (!ready[static_cast<size_t>(grp.lo)]) {
            int p = -1;
            ready_q.pop(p);
            if (p < 0) return;  // shutdown
            ready[static_cast<size_t>(p)] = 1;
          }
          if (hooks_.on_allreduce) hooks_.on_allreduce(iter, static_cast<int>(g), grp, ready);
          const double t_start = us_since(iter_start, Clock::now());
          buf.clear();
          for (int p = grp.hi; p >= grp.lo; --p)
            for (Matrix* gm : net.layer(net.param_layer_index(p)).grads()) buf.insert(buf.end(), gm->data(), gm->data() + gm->size());
          allreduce.run(buf, iter * 4096 + static_cast<int64_t>(g));
          const float inv = 1.0f / static_cast<float>(P);
          size_t o = 0;
          for (int p = grp.hi; p >= grp.lo; --p)
            for (Matrix* gm : net.layer(net.param_layer_index(p)).grads())
              for (Eigen::Index i = 0; i < gm->size(); ++i) gm->data()[i] = buf[o++] * inv;
          const double t_end = us_since(iter_start, Clock::now());
          std::lock_guard lock(mu);
          group_times.emplace_back(t_start, t_end);
          ++groups_done;
          cv.notify_all();
        }
      }
    } catch (const tbb::user_abort&) {
    } catch (...) {
      std::lock_guard lock(mu);
      comm_error = std::current_exception();
      cv.notify_all();
    }
  });
  auto shutdown = [&] {
    {
      std::lock_guard lock(mu);
      stop = true;
      cv.notify_all();
    }
    ready_q.try_push(-1);
    ready_q.abort();
    if (comm.joinable()) comm.join();
  };

  io::EpochSampler sampler(train_.n, cfg_.job.seed, static_cast<uint64_t>(rank));
  std::vector<int64_t> rows;
  Matrix x;
  std::vector<int32_t> labels;
  std::vector<double> layer_us;
  std::vector<std::vector<double>> prof_layer_us;  // profiling iterations: per layer
  std::vector<double> prof_forward_us, recent_backward_us;
  JsonlWriter metrics;
  if (rank == 0 && !cfg_.output.metrics.empty() && !cfg_.output.dir.empty()) {
    std::filesystem::create_directories(cfg_.output.dir);
    metrics.open((std::filesystem::path(cfg_.output.dir) / cfg_.output.metrics).string());
  }
  Trace trace;
  int64_t trace_from = -1;
  double predicted_us = 0;
  Stopwatch total;

  auto plan_now = [&](bool replan) {
    // Rank 0: the profile from its measurements, the cost model from timed all-reduces (every rank
    // takes part), the plan; then everyone receives cost and plan.
    Profile prof;
    prof.source = "live";
    prof.layers.resize(static_cast<size_t>(L));
    for (int p = 0; p < L; ++p) {
      prof.layers[static_cast<size_t>(p)].name = net.layer(net.param_layer_index(p)).name();
      prof.layers[static_cast<size_t>(p)].params = net.param_floats(p);
    }
    for (int i = 0; i < net.layers(); ++i) {
      std::vector<double> v;
      for (const auto& it : prof_layer_us) v.push_back(it[static_cast<size_t>(i)]);
      const int owner = std::max(0, net.owner_param_layer(i));
      prof.layers[static_cast<size_t>(owner)].t_b_us += median(v);
    }
    prof.forward_us = median(prof_forward_us);
    // a and b on this communicator: all-reduces from 4 KiB to the whole model.
    std::vector<Sample> samples;
    std::vector<float> probe;
    const int64_t max_bytes = std::max<int64_t>(4096, net.total_params() * 4);
    int64_t id = int64_t{1} << 40;
    for (int64_t bytes = 4096;; bytes *= 2) {
      const int64_t b = std::min(bytes, max_bytes);
      probe.assign(static_cast<size_t>(b / 4), 1.0f);
      std::vector<double> times;
      for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = Clock::now();
        allreduce.run(probe, id++);
        times.push_back(us_since(t0, Clock::now()));
      }
      samples.push_back({b, median(times)});
      if (b >= max_bytes) break;
    }
    CostModel cost;
    Plan chosen;
    if (rank == 0) {
      const Fit fit = fit_cost_model(samples, 0);
      cost = fit.model;
      if (cost.a_us < 0) cost.a_us = 0;  // noise on a fast link; a negative start-up is not physical
      if (cost.b_us_per_byte < 0) cost.b_us_per_byte = 0;
      chosen = make_plan(cfg_.mgwfbp.planner, prof, cost);
      spdlog::info("{}profile: t_f {:.0f} us, t_b {:.0f} us over {} param layers; all-reduce fit a = {:.1f} us, b = {:.3e} "
                   "us/B (R^2 {:.3f})",
                   replan ? "re-" : "", prof.forward_us, prof.backward_us(), L, cost.a_us, cost.b_us_per_byte, fit.r2);
      res.predictions = predict(prof, planner_names(), {P}, [&](int) { return cost; });
      for (const auto& pr : res.predictions)
        spdlog::info("  planner {:<10} {:>3} groups, predicted iteration {:>9.0f} us, non-overlapped comm {:>8.0f} us",
                     pr.planner, pr.groups, pr.iteration_us, pr.non_overlapped_us);
      spdlog::info("plan ({}): {}", cfg_.mgwfbp.planner, describe(chosen));
    }
    const std::string enc = rank == 0 ? encode_plan(chosen, cost) : std::string();
    const comm::Bytes got = comm::broadcast_bytes(t_, 0, std::as_bytes(std::span(enc.data(), enc.size())));
    active = decode_plan(got, cost, L);
    res.plan = active;
    res.cost = cost;
    res.profile = prof;
    predicted_us = simulate(prof, cost, active).iteration_us;
  };

  const int64_t iters = cfg_.stop.max_clocks;
  try {
    for (int64_t it = 0; it < iters; ++it) {
      // Re-plan on drift (rank 0 decides, everyone learns it in the same collective).
      if (!hooks_.plan && it == profile_iters && profile_iters > 0) {
        plan_now(false);
        trace_from = it;
      } else if (!hooks_.plan && cfg_.mgwfbp.replan_threshold > 0 && it > profile_iters && it % cfg_.mgwfbp.replan_every == 0) {
        int64_t flag = 0;
        if (rank == 0) {
          const double now = median(recent_backward_us), then = res.profile.backward_us();
          flag = then > 0 && std::abs(now - then) / then > cfg_.mgwfbp.replan_threshold ? 1 : 0;
        }
        const auto flags = comm::allgather_i64(t_, flag);
        if (flags[0]) {
          plan_now(true);
          ++res.replans;
        }
      }
      const bool profiling = it < profile_iters;
      // The minibatch.
      if (hooks_.batch) hooks_.batch(it, rows);
      else sampler.next(cfg_.optimizer.minibatch, rows);
      x.resize(static_cast<int64_t>(rows.size()), train_.dim);
      labels.resize(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        x.row(static_cast<int64_t>(i)) = train_.dense.row(rows[i]);
        labels[i] = train_.labels[static_cast<size_t>(rows[i])];
      }
      {
        std::lock_guard lock(mu);
        groups_done = 0;
        group_times.clear();
        iter_start = Clock::now();
        comm_iter = it;
        cv.notify_all();
      }
      const auto t0 = iter_start;
      net.forward(x);
      const auto t1 = Clock::now();
      const double loss = net.backward(labels, [&](int p) { ready_q.push(p); }, &layer_us);
      const auto t2 = Clock::now();
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return comm_error || groups_done == static_cast<int>(active.size()); });
        if (comm_error) std::rethrow_exception(comm_error);
      }
      const auto t3 = Clock::now();
      // SGD with momentum and weight decay on the averaged gradients.
      const float lr = static_cast<float>(cfg_.optimizer.lr / (1.0 + cfg_.optimizer.lr_decay * static_cast<double>(it)));
      for (int p = 0; p < L; ++p) {
        auto& layer = net.layer(net.param_layer_index(p));
        const auto ps = layer.params();
        const auto gs = layer.grads();
        for (size_t k = 0; k < ps.size(); ++k) {
          Matrix& v = velocity[static_cast<size_t>(p)][k];
          v = static_cast<float>(cfg_.cnn.momentum) * v + *gs[k] + static_cast<float>(cfg_.cnn.weight_decay) * *ps[k];
          *ps[k] -= lr * v;
        }
      }
      net.params_changed();
      const auto t4 = Clock::now();
      IterationStats st;
      st.iteration = it;
      st.forward_us = us_since(t0, t1);
      st.backward_us = us_since(t1, t2);
      st.comm_wait_us = us_since(t2, t3);
      st.iteration_us = us_since(t0, t4);
      st.predicted_us = profiling ? 0.0 : predicted_us;
      st.loss = loss;
      res.iterations.push_back(st);
      if (profiling) {
        prof_layer_us.push_back(layer_us);
        prof_forward_us.push_back(st.forward_us);
      }
      recent_backward_us.push_back(st.backward_us);
      if (recent_backward_us.size() > 50) recent_backward_us.erase(recent_backward_us.begin());
      // The timeline of the first traced iterations: forward, backward per layer, each group.
      if (rank == 0 && trace_from >= 0 && it < trace_from + cfg_.output.trace_iters) {
        const double base = us_since(Clock::time_point{}, t0);
        trace.add(fmt::format("forward {}", it), 0, base, st.forward_us, rank);
        double at = base + st.forward_us;
        for (int i = net.layers() - 1; i >= 0; --i) {
          trace.add(fmt::format("backward {}", net.layer(i).name()), 1, at, layer_us[static_cast<size_t>(i)], rank);
          at += layer_us[static_cast<size_t>(i)];
        }
        std::lock_guard lock(mu);
        for (size_t g = 0; g < group_times.size(); ++g)
          trace.add(fmt::format("allreduce group {} (layers {}-{})", g, active[g].lo, active[g].hi), 2,
                    base + group_times[g].first, group_times[g].second - group_times[g].first, rank);
        trace.add("update", 0, base + us_since(t0, t3), us_since(t3, t4), rank);
      }
      // Progress and metrics.
      const bool last = it + 1 == iters;
      if (rank == 0 && ((it + 1) % cfg_.eval.every == 0 || last)) {
        double acc = -1;
        if (test_ && test_->n > 0) {
          int64_t right = 0;
          Matrix tx;
          for (int64_t b = 0; b < test_->n; b += 1000) {
            const int64_t e = std::min(test_->n, b + 1000);
            tx = test_->dense.middleRows(b, e - b);
            const auto pred = net.predict(tx);
            for (int64_t i = b; i < e; ++i) right += pred[static_cast<size_t>(i - b)] == test_->labels[static_cast<size_t>(i)];
          }
          acc = static_cast<double>(right) / static_cast<double>(test_->n);
          res.test_accuracy = acc;
        }
        // Means over the iterations since the last report (after profiling).
        double f = 0, bw = 0, w = 0, itu = 0;
        int cnt = 0;
        for (auto r = res.iterations.rbegin(); r != res.iterations.rend() && cnt < cfg_.eval.every; ++r, ++cnt) {
          f += r->forward_us;
          bw += r->backward_us;
          w += r->comm_wait_us;
          itu += r->iteration_us;
        }
        cnt = std::max(cnt, 1);
        spdlog::info("iter {:>6}/{} | loss {:.4f} | test acc {} | iteration {:.1f} ms (forward {:.1f}, backward {:.1f}, "
                     "comm not overlapped {:.1f}; predicted {:.1f})",
                     it + 1, iters, loss, acc >= 0 ? fmt::format("{:.2f}%", 100 * acc) : std::string("n/a"),
                     itu / cnt / 1e3, f / cnt / 1e3, bw / cnt / 1e3, w / cnt / 1e3, predicted_us / 1e3);
        if (metrics.is_open())
          metrics.write(fmt::format(
              R"({{"iteration": {}, "seconds": {:.6f}, "loss": {:.6f}, "accuracy": {:.6f}, "forward_us": {:.1f}, "backward_us": {:.1f}, "comm_wait_us": {:.1f}, "iteration_us": {:.1f}, "predicted_us": {:.1f}}})",
              it + 1, total.seconds(), loss, acc, f / cnt, bw / cnt, w / cnt, itu / cnt, predicted_us));
      }
    }
  } catch (...) {
    shutdown();
    throw;
  }
  shutdown();
  res.seconds = total.seconds();
  for (int p = 0; p < L; ++p)
    for (Matrix* m : net.layer(net.param_layer_index(p)).params()) res.params.insert(res.params.end(), m->data(), m->data() + m->size());
  res.checksum = fnv1a64(std::string_view(reinterpret_cast<const char*>(res.params.data()), res.params.size() * sizeof(float)));
  res.bytes_sent = t_.total_counters().bytes_sent;
  if (rank == 0 && !cfg_.output.trace.empty() && !cfg_.output.dir.empty() && !trace.events.empty()) {
    std::string json = "{\"traceEvents\": [\n";
    for (size_t i = 0; i < trace.events.size(); ++i) json += trace.events[i] + (i + 1 < trace.events.size() ? ",\n" : "\n");
    json += "], \"displayTimeUnit\": \"ms\", \"otherData\": {\"tracks\": \"tid 0: forward and update, 1: backward per layer, 2: all-reduce per group\"}}\n";
    write_file_atomic((std::filesystem::path(cfg_.output.dir) / cfg_.output.trace).string(), json);
  }
  return res;
}

}  // namespace sfb::mgwfbp
