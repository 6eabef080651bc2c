// CUDA layers against the CPU layers (label `cuda`): forward logits, every parameter gradient and
// a few training iterations of the executor agree within float tolerance. Every test skips, with
// the reason, when no CUDA device answers.
#include <cmath>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "sfb/cnn/cuda/cuda_backend.h"
#include "sfb/cnn/executor.h"
#include "sfb/cnn/network.h"
#include "testing/configs.h"
#include "testing/rank_threads.h"

namespace sfb::cnn {
namespace {

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    std::string why;                                                           \
    if (cuda::device_count(&why) == 0) GTEST_SKIP() << "no GPU here: " << why; \
  } while (0)

// The CUDA module (libsfb_cuda.so) loads in a CUDA build, on a machine without a GPU too: every
// sfb symbol it takes from this executable resolves (dlopen's RTLD_NOW binds them all), and the
// answer comes from the CUDA runtime, not from a loader that gave up. The module is loaded on
// first use only: before this test asks, no CUDA library is mapped.
TEST(CudaModule, LoadsOnFirstUseAndAnswersWithoutAGpu) {
  if (!cuda::built()) GTEST_SKIP() << "this build has no CUDA layers";
  auto mapped = [] {
    std::ifstream maps("/proc/self/maps");
    std::string line, all;
    while (std::getline(maps, line)) all += line + "\n";
    return all;
  };
  EXPECT_EQ(mapped().find("libcublas"), std::string::npos) << "cuBLAS mapped before any CUDA call";
  std::string why;
  const int n = cuda::device_count(&why);
  if (n == 0) EXPECT_EQ(why.rfind("no CUDA device answers (cudaGetDeviceCount: ", 0), 0u) << why;
  EXPECT_NE(mapped().find("libsfb_cuda.so"), std::string::npos);
  EXPECT_NE(cuda::library_versions().find("CUDA runtime "), std::string::npos) << cuda::library_versions();
}

Matrix random_batch(int n, int64_t dim, uint64_t seed) {
  Matrix x(n, dim);
  Rng rng = make_rng(seed, 2);
  std::uniform_real_distribution<float> u(0, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = u(rng);
  return x;
}

// n rows of `dim` uniform features, label i % classes.
io::Dataset labelled_data(int n, int64_t dim, int classes, uint64_t seed) {
  io::Dataset d;
  d.n = n;
  d.dim = dim;
  d.classes = classes;
  d.dense = random_batch(n, dim, seed);
  for (int i = 0; i < n; ++i) d.labels.push_back(i % classes);
  return d;
}

// The same initial weights in both networks; `gpu` runs on GPU 0.
void init_cpu_and_gpu(Network& cpu, Network& gpu, uint64_t seed) {
  Rng r1 = make_rng(seed, 1), r2 = make_rng(seed, 1);
  cpu.init(r1);
  gpu.init(r2);
  gpu.set_backend(cuda::make_backend(gpu, 0));
}

// Rank 0's weights after training `cfg` on 2 in-process ranks on the CPU or the GPU, with `plan`
// (null: profiled and planned).
std::vector<float> trained_weights(Config cfg, const io::Dataset& d, bool on_gpu, const mgwfbp::Plan* plan) {
  cfg.job.device = on_gpu ? Device::kCuda : Device::kCpu;
  ExecutorHooks h;
  h.plan = plan;
  std::vector<float> w;
  testing::run_ranks(2, [&](comm::Transport& t) {
    Executor ex(cfg, t, d, nullptr, h);
    auto r = ex.run();
    if (t.rank() == 0) w = r.params;
  });
  return w;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float diff = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
  return diff;
}

TEST(Cuda, LayersMatchTheCpuLayers) {
  SKIP_WITHOUT_GPU();
  const std::string spec = "conv:6:5:2,relu,pool:2,conv:8:3:1,relu,pool:2,fc:32,relu,fc:10";
  const Shape in{1, 28, 28};
  Network cpu(spec, in), gpu(spec, in);
  init_cpu_and_gpu(cpu, gpu, 1);
  const Matrix x = random_batch(7, in.size(), 3);
  std::vector<int32_t> labels = {0, 1, 2, 3, 4, 5, 6};
  const Matrix zc = cpu.forward(x);
  const Matrix zg = gpu.forward(x);
  EXPECT_LT((zc - zg).cwiseAbs().maxCoeff(), 1e-4f * std::max(1.0f, zc.cwiseAbs().maxCoeff()));
  std::vector<int> order_c, order_g;
  const double lc = cpu.backward(labels, [&](int p) { order_c.push_back(p); });
  const double lg = gpu.backward(labels, [&](int p) { order_g.push_back(p); });
  EXPECT_NEAR(lc, lg, 1e-4);
  EXPECT_EQ(order_c, order_g);
  for (int p = 0; p < cpu.param_layers(); ++p) {
    const auto gc = cpu.param_layer(p).grads();
    const auto gg = gpu.param_layer(p).grads();
    for (size_t k = 0; k < gc.size(); ++k)
      EXPECT_LT((*gc[k] - *gg[k]).cwiseAbs().maxCoeff(), 1e-4f * std::max(1.0f, gc[k]->cwiseAbs().maxCoeff()))
          << cpu.param_layer(p).name() << " gradient " << k;
  }
}

TEST(Cuda, ExecutorOnGpuTracksTheCpuRun) {
  SKIP_WITHOUT_GPU();
  const io::Dataset d = labelled_data(256, 64, 4, 9);
  const Config cfg = testing::quiet_cnn("conv:4:3:1,relu,pool:2,fc:16,relu,fc:4", 16, 10);
  const std::vector<float> cpu = trained_weights(cfg, d, false, nullptr), gpu = trained_weights(cfg, d, true, nullptr);
  ASSERT_EQ(cpu.size(), gpu.size());
  EXPECT_LT(max_abs_diff(cpu, gpu), 1e-3f);
}

// The hybrid transport on the GPU: a factor layer downloads its delta and input (not dW), which
// equal the CPU layer's, and training with fully connected layers sent as factors on the GPU ends
// where the dense CPU run ends.
TEST(Cuda, FactorLayersDownloadTheCpuFactorsAndTrainAlike) {
  SKIP_WITHOUT_GPU();
  const std::string spec = "conv:4:3:1,relu,pool:2,fc:32,relu,fc:4";
  const Shape in{1, 8, 8};
  Network cpu(spec, in), gpu(spec, in);
  init_cpu_and_gpu(cpu, gpu, 2);
  const std::vector<char> sf = {0, 1, 1};
  cpu.set_factor_layers(sf);
  gpu.set_factor_layers(sf);
  const Matrix x = random_batch(5, in.size(), 4);
  const std::vector<int32_t> labels = {0, 1, 2, 3, 0};
  cpu.forward(x);
  gpu.forward(x);
  cpu.backward(labels, {});
  gpu.backward(labels, {});
  for (int p : {1, 2}) {
    const Factors fc = cpu.factors(p), fg = gpu.factors(p);
    ASSERT_EQ(fc.delta->rows(), fg.delta->rows());
    ASSERT_EQ(fc.input->cols(), fg.input->cols());
    EXPECT_LT((*fc.delta - *fg.delta).cwiseAbs().maxCoeff(), 1e-5f) << "layer " << p;
    EXPECT_LT((*fc.input - *fg.input).cwiseAbs().maxCoeff(), 1e-4f) << "layer " << p;
  }

  const io::Dataset d = labelled_data(256, in.size(), 4, 9);
  const mgwfbp::Plan dense{{2, 2}, {1, 1}, {0, 0}}, hybrid{{1, 2, true}, {0, 0}};
  const Config cfg = testing::quiet_cnn(spec, 16, 10);
  const std::vector<float> cpu_w = trained_weights(cfg, d, false, &dense),
                           gpu_w = trained_weights(cfg, d, true, &hybrid);
  ASSERT_EQ(cpu_w.size(), gpu_w.size());
  EXPECT_LT(max_abs_diff(cpu_w, gpu_w), 1e-3f);
}

}  // namespace
}  // namespace sfb::cnn
