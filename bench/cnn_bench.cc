// The CNN of configs/fashion_cnn_mgwfbp.toml on one rank's batch: one training step (forward,
// loss, backward) per kernel set (cnn.kernels: 0 = onednn, 1 = reference), with each layer's
// forward and backward time as counters (microseconds per step) and the step's arithmetic rate
// (GFLOP/s: 2 multiply-adds per MAC of every convolution and fully connected product, forward,
// input gradient (not for the first layer) and weight gradient). Threads: OMP_NUM_THREADS
// (scripts/bench.sh sets 1, the per-rank setting of the 4-rank runs).
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>

#include "sfb/cnn/factor_grads.h"
#include "sfb/cnn/network.h"
#include "sfb/cnn/onednn_layers.h"
#include "sfb/core/gemm.h"

namespace {

using sfb::Matrix;
using sfb::cnn::Kernels;
using sfb::cnn::LayerInfo;
using sfb::cnn::Network;

constexpr const char* kSpec = "conv:16:5:2,relu,pool:2,conv:32:5:2,relu,pool:2,fc:128,relu,fc:10";

double step_flops(Network& net, int64_t batch) {
  double flops = 0;
  for (int i = 0; i < net.layers(); ++i) {
    const LayerInfo li = net.layer(i).info();
    double macs = 0;
    if (li.kind == LayerInfo::Kind::kConv)
      macs = static_cast<double>(li.out.size()) * li.in.c * li.kernel * li.kernel;
    else if (li.kind == LayerInfo::Kind::kLinear)
      macs = static_cast<double>(li.out.size()) * static_cast<double>(li.in.size());
    flops += 2.0 * macs * (i == 0 ? 2 : 3) * static_cast<double>(batch);
  }
  return flops;
}

void BM_CnnStep(benchmark::State& state) {
  const auto kernels = state.range(0) == 0 ? Kernels::kOneDnn : Kernels::kReference;
  const int64_t batch = state.range(1);
  sfb::set_compute_threads(1);
  Network net(kSpec, {1, 28, 28}, kernels);
  sfb::Rng rng = sfb::make_rng(1, 1);
  net.init(rng);
  Matrix x(batch, 28 * 28);
  std::uniform_real_distribution<float> u(0, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = u(rng);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 10);
  std::vector<double> fwd_us(static_cast<size_t>(net.layers()), 0.0), bwd_us(fwd_us), layer_us;
  std::vector<Matrix> acts(static_cast<size_t>(net.layers()) + 1);
  acts[0] = x;
  for (auto _ : state) {
    // Forward layer by layer to time each; the same work as Network::forward.
    for (int i = 0; i < net.layers(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      net.layer(i).forward(acts[static_cast<size_t>(i)], acts[static_cast<size_t>(i) + 1]);
      fwd_us[static_cast<size_t>(i)] +=
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    net.forward(x);  // the network's own activations for backward()
    benchmark::DoNotOptimize(net.backward(labels, {}, &layer_us));
    for (size_t i = 0; i < layer_us.size(); ++i) bwd_us[i] += layer_us[i];
  }
  const double steps = static_cast<double>(state.iterations());
  double fwd_total = 0, bwd_total = 0;
  for (int i = 0; i < net.layers(); ++i) {
    const auto u = static_cast<size_t>(i);
    state.counters[std::to_string(i) + "_" + net.layer(i).name() + "_fwd_us"] = fwd_us[u] / steps;
    state.counters[std::to_string(i) + "_" + net.layer(i).name() + "_bwd_us"] = bwd_us[u] / steps;
    fwd_total += fwd_us[u] / steps;
    bwd_total += bwd_us[u] / steps;
  }
  // Forward runs twice per step above: the step time the executor sees is one forward + backward.
  state.counters["step_ms"] = (fwd_total + bwd_total) / 1000.0;
  state.counters["GFLOP/s"] = step_flops(net, batch) / ((fwd_total + bwd_total) * 1e3);
  state.SetLabel(kernels == Kernels::kOneDnn ? sfb::cnn::onednn_info() + ", " + sfb::blas_info() : "reference");
}
BENCHMARK(BM_CnnStep)->ArgNames({"reference", "batch"})->Args({0, 32})->Args({1, 32})->Unit(benchmark::kMillisecond);

}  // namespace

// The hybrid transport's rebuild of a fully connected layer's gradient from P ranks' factors of
// B rows each (cnn/factor_grads.h): one (P B)-deep GEMM plus the stacking copies. Args: out, in,
// P (B = 32). GFLOP/s counts the GEMM's 2 P B out in FLOPs, to compare with this machine's SGEMM
// rate (bench/update_bench).
void BM_FactorRebuild(benchmark::State& state) {
  const int64_t out = state.range(0), in = state.range(1), P = state.range(2), B = 32;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<sfb::SfBatch> batches(static_cast<size_t>(P));
  std::vector<const sfb::SfBatch*> ptrs;
  for (auto& b : batches) {
    b.count = static_cast<int32_t>(B);
    b.J = static_cast<int32_t>(out);
    b.D = static_cast<int32_t>(in);
    b.u = Matrix::NullaryExpr(B, out, [&] { return u(rng); });
    b.v = Matrix::NullaryExpr(B, in, [&] { return u(rng); });
    ptrs.push_back(&b);
  }
  Matrix dW(out, in), db(1, out);
  sfb::cnn::RebuildScratch scratch;
  for (auto _ : state) sfb::cnn::rebuild_gradient(ptrs, 1.0f / static_cast<float>(P), dW, db, scratch);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(P * B * out * in) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_FactorRebuild)
    ->ArgNames({"out", "in", "P"})
    ->Args({2048, 3136, 4})
    ->Args({2048, 2048, 4})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
