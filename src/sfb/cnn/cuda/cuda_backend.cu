// CUDA backend of the MG-WFBP network: the same layers as src/sfb/cnn/layer.cc, on a GPU, through
// the vendor libraries. Convolution (forward, data and filter gradients), bias, max pooling and
// ReLU are cuDNN calls; the fully connected layers are cuBLAS GEMMs. The only kernel of our own is
// the softmax cross-entropy of the last layer (no library call returns the per-sample loss and its
// gradient together; it touches n x classes floats once).
//
// Activations live on the device for a whole iteration; parameters are uploaded after each host
// update (params_changed), and each param layer's gradients are downloaded into the host copies
// (pinned staging) before the layer is reported ready to the communication thread, which
// all-reduces host buffers over MPI.
//
// Arithmetic is strict FP32 (CUDNN_FMA_MATH, cuBLAS's default math): no TF32, so the GPU run
// tracks the CPU run within float tolerance (tests/cnn/cuda_test.cc). The backward algorithms are
// the fastest deterministic ones cuDNN's heuristics offer, so a rank's gradients do not depend on
// atomics' order. Plans (descriptors, algorithms, workspace) are made once per batch size.
//
// Layouts match the CPU layers: row-major, one sample per row, C x H x W (NCHW), filters
// oc x c x k x k (KCRS). cuBLAS is column-major: a row-major M (r x c) is the column-major M^T
// (c x r), and the GEMMs below are written that way.
#include "sfb/cnn/cuda/cuda_module.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::cnn::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CommError(fmt::format("CUDA: {}: {}", what, cudaGetErrorString(e)));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw CommError(fmt::format("cuBLAS: {}: status {}", what, static_cast<int>(s)));
}
void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw CommError(fmt::format("cuDNN: {}: {}", what, cudnnGetErrorString(s)));
}

// A device buffer of T, grown on demand (contents are not kept when it grows).
template <typename T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p(o.p), n(o.n) {
    o.p = nullptr;
    o.n = 0;
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  void resize(size_t count) {
    if (count <= n) return;
    if (p) cudaFree(p);
    p = nullptr;
    check(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)), "cudaMalloc");
    n = count;
  }
};

// Owner of one cuDNN descriptor.
template <typename D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)>
class Desc {
 public:
  Desc() { check(Create(&d_), "create descriptor"); }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc() { Destroy(d_); }
  D get() const { return d_; }

 private:
  D d_{};
};
using TensorDesc = Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Desc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Desc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Desc<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using ActDesc = Desc<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

void set_nchw(const TensorDesc& d, int64_t n, int c, int h, int w) {
  check(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n), c, h, w),
        "tensor descriptor");
}

// The first algorithm of a heuristic list that succeeded, is deterministic when asked and fits
// the workspace limit.
template <typename Perf>
Perf pick(const Perf* perf, int count, bool deterministic, const char* what) {
  constexpr size_t kWorkspaceLimit = size_t{1} << 30;
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kWorkspaceLimit &&
        (!deterministic || perf[i].determinism == CUDNN_DETERMINISTIC))
      return perf[i];
  throw CommError(fmt::format("cuDNN: no usable {} algorithm among {} candidates", what, count));
}

// Descriptors and algorithms of one layer for one batch size.
struct LayerPlan {
  TensorDesc x, y, bias;  // x, y: NCHW of the batch; bias: 1 x C x 1 x 1
  FilterDesc w;
  ConvDesc conv;
  PoolDesc pool;
  ActDesc act;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t workspace = 0;
};

void plan_conv(cudnnHandle_t h, const LayerInfo& li, LayerPlan& p) {
  check(cudnnSetFilter4dDescriptor(p.w.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, li.out.c, li.in.c, li.kernel,
                                   li.kernel),
        "filter descriptor");
  check(cudnnSetConvolution2dDescriptor(p.conv.get(), li.pad, li.pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT),
        "convolution descriptor");
  check(cudnnSetConvolutionMathType(p.conv.get(), CUDNN_FMA_MATH), "convolution math type");
  constexpr int kMax = 16;
  int got = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kMax];
  check(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x.get(), p.w.get(), p.conv.get(), p.y.get(), kMax, &got, fwd),
        "forward algorithms");
  const auto f = pick(fwd, got, false, "convolution forward");
  cudnnConvolutionBwdDataAlgoPerf_t bd[kMax];
  check(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w.get(), p.y.get(), p.conv.get(), p.x.get(), kMax, &got, bd),
        "backward data algorithms");
  const auto d = pick(bd, got, true, "convolution backward data");
  cudnnConvolutionBwdFilterAlgoPerf_t bf[kMax];
  check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x.get(), p.y.get(), p.conv.get(), p.w.get(), kMax, &got, bf),
        "backward filter algorithms");
  const auto w = pick(bf, got, true, "convolution backward filter");
  p.fwd = f.algo;
  p.bwd_data = d.algo;
  p.bwd_filter = w.algo;
  p.workspace = std::max({f.memory, d.memory, w.memory});
}

std::unique_ptr<LayerPlan> make_plan(cudnnHandle_t h, const LayerInfo& li, int64_t n) {
  auto p = std::make_unique<LayerPlan>();
  const bool linear = li.kind == LayerInfo::Kind::kLinear;
  // A fully connected layer's input is seen as in.size() channels of 1 x 1.
  if (linear)
    set_nchw(p->x, n, static_cast<int>(li.in.size()), 1, 1);
  else
    set_nchw(p->x, n, li.in.c, li.in.h, li.in.w);
  set_nchw(p->y, n, li.out.c, li.out.h, li.out.w);
  set_nchw(p->bias, 1, li.out.c, 1, 1);
  switch (li.kind) {
    case LayerInfo::Kind::kConv: plan_conv(h, li, *p); break;
    case LayerInfo::Kind::kPool:
      check(cudnnSetPooling2dDescriptor(p->pool.get(), CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_NOT_PROPAGATE_NAN,
                                        li.kernel, li.kernel, 0, 0, li.kernel, li.kernel),
            "pooling descriptor");
      break;
    case LayerInfo::Kind::kRelu:
      check(cudnnSetActivationDescriptor(p->act.get(), CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
            "activation descriptor");
      break;
    case LayerInfo::Kind::kLinear: break;
  }
  return p;
}

// One thread per row: loss and (p - onehot) / n.
__global__ void softmax_ce_kernel(const float* z, const int* labels, float* dz, float* loss, int64_t n, int classes) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < n;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float* zr = z + r * classes;
    float m = zr[0];
    for (int j = 1; j < classes; ++j) m = fmaxf(m, zr[j]);
    float s = 0.0f;
    for (int j = 0; j < classes; ++j) s += expf(zr[j] - m);
    const int y = labels[r];
    loss[r] = -(zr[y] - m - logf(s));
    for (int j = 0; j < classes; ++j)
      dz[r * classes + j] = (expf(zr[j] - m) / s - (j == y ? 1.0f : 0.0f)) / static_cast<float>(n);
  }
}

constexpr int kThreads = 256;
inline int blocks(int64_t n) { return static_cast<int>(std::max<int64_t>(1, (n + kThreads - 1) / kThreads)); }
constexpr float kOne = 1.0f, kZero = 0.0f;

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(Network& net, int device) : net_(net) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cublasCreate(&blas_), "cublasCreate");
    check(cudnnCreate(&dnn_), "cudnnCreate");
    const size_t L = static_cast<size_t>(net.layers());
    acts_.resize(L + 1);
    set_factor_layers(std::vector<char>(L, 0));
    params_.resize(L);
    grads_.resize(L);
    for (size_t i = 0; i < L; ++i)
      for (Matrix* m : net.layer(static_cast<int>(i)).params()) {
        params_[i].emplace_back().resize(static_cast<size_t>(m->size()));
        grads_[i].emplace_back().resize(static_cast<size_t>(m->size()));
      }
    params_changed();
  }
  ~CudaBackend() override {
    plans_.clear();
    if (pinned_) cudaFreeHost(pinned_);
    cudnnDestroy(dnn_);
    cublasDestroy(blas_);
  }
  std::string name() const override { return "cuda"; }

  void set_factor_layers(const std::vector<char>& by_layer) override {
    factor_layer_ = by_layer;
    fac_delta_.resize(by_layer.size());
    fac_input_.resize(by_layer.size());
  }
  Factors factors(int layer) const override {
    return {&fac_delta_[static_cast<size_t>(layer)], &fac_input_[static_cast<size_t>(layer)]};
  }

  void params_changed() override {
    for (int i = 0; i < net_.layers(); ++i) {
      auto ps = net_.layer(i).params();
      for (size_t k = 0; k < ps.size(); ++k)
        check(cudaMemcpy(params_[static_cast<size_t>(i)][k].p, ps[k]->data(),
                         static_cast<size_t>(ps[k]->size()) * sizeof(float), cudaMemcpyHostToDevice),
              "upload parameters");
    }
  }

  const Matrix& forward(const Matrix& x) override {
    n_ = x.rows();
    plan_ = &plans_for(n_);
    acts_[0].resize(static_cast<size_t>(x.size()));
    check(cudaMemcpy(acts_[0].p, x.data(), static_cast<size_t>(x.size()) * sizeof(float), cudaMemcpyHostToDevice),
          "upload batch");
    for (int i = 0; i < net_.layers(); ++i) forward_layer(i);
    const auto out = net_.layer(net_.layers() - 1).info().out;
    logits_.resize(n_, out.size());
    check(cudaMemcpy(logits_.data(), acts_.back().p, static_cast<size_t>(logits_.size()) * sizeof(float),
                     cudaMemcpyDeviceToHost),
          "download logits");
    return logits_;
  }

  double backward(const std::vector<int32_t>& labels, const std::function<void(int)>& on_ready,
                  std::vector<double>* layer_us) override {
    const double loss = loss_and_gradient(labels);
    if (layer_us) layer_us->assign(static_cast<size_t>(net_.layers()), 0.0);
    for (int i = net_.layers() - 1; i >= 0; --i) {
      const auto t0 = std::chrono::steady_clock::now();
      backward_layer(i, i > 0);
      const bool has_params = factor_layer_[static_cast<size_t>(i)] ? download_factors(i) : download_grads(i);
      if (layer_us)
        (*layer_us)[static_cast<size_t>(i)] =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (has_params && on_ready) on_ready(net_.owner_param_layer(i));
      if (i > 0) std::swap(grad_.p, grad_next_.p), std::swap(grad_.n, grad_next_.n);
    }
    return loss;
  }

 private:
  std::vector<std::unique_ptr<LayerPlan>>& plans_for(int64_t n) {
    auto it = plans_.find(n);
    if (it != plans_.end()) return it->second;
    std::vector<std::unique_ptr<LayerPlan>> plans;
    size_t ws = 0;
    for (int i = 0; i < net_.layers(); ++i) {
      plans.push_back(make_plan(dnn_, net_.layer(i).info(), n));
      ws = std::max(ws, plans.back()->workspace);
    }
    workspace_.resize(ws);
    return plans_.emplace(n, std::move(plans)).first->second;
  }

  // Mean cross-entropy of the logits on the device; grad_ gets its gradient w.r.t. the logits.
  double loss_and_gradient(const std::vector<int32_t>& labels) {
    const int classes = static_cast<int>(logits_.cols());
    labels_.resize(static_cast<size_t>(n_));
    check(cudaMemcpy(labels_.p, labels.data(), static_cast<size_t>(n_) * sizeof(int), cudaMemcpyHostToDevice),
          "upload labels");
    grad_.resize(static_cast<size_t>(n_ * classes));
    loss_.resize(static_cast<size_t>(n_));
    softmax_ce_kernel<<<blocks(n_), kThreads>>>(acts_.back().p, labels_.p, grad_.p, loss_.p, n_, classes);
    check(cudaGetLastError(), "softmax_ce_kernel");
    std::vector<float> losses(static_cast<size_t>(n_));
    check(cudaMemcpy(losses.data(), loss_.p, losses.size() * sizeof(float), cudaMemcpyDeviceToHost), "download loss");
    double loss = 0;
    for (float l : losses) loss += l;
    return n_ > 0 ? loss / static_cast<double>(n_) : 0.0;
  }

  // Host copies of layer i's gradients, through pinned memory (synchronous: the layer is done when
  // this returns). False for a layer without parameters.
  bool download_grads(int i) {
    auto ps = net_.layer(i).grads();
    if (ps.empty()) return false;
    for (size_t k = 0; k < ps.size(); ++k) {
      const size_t bytes = static_cast<size_t>(ps[k]->size()) * sizeof(float);
      stage(bytes);
      check(cudaMemcpy(pinned_, grads_[static_cast<size_t>(i)][k].p, bytes, cudaMemcpyDeviceToHost),
            "download gradients");
      std::memcpy(ps[k]->data(), pinned_, bytes);
    }
    return true;
  }

  // Host copies of a factor layer's delta (the gradient w.r.t. its output, still in grad_) and input
  // instead of its parameter gradients: B (out + in) floats instead of out x in.
  bool download_factors(int i) {
    const LayerInfo li = net_.layer(i).info();
    auto down = [&](Matrix& m, const float* src, int64_t cols, const char* what) {
      m.resize(n_, cols);
      const size_t bytes = static_cast<size_t>(m.size()) * sizeof(float);
      stage(bytes);
      check(cudaMemcpy(pinned_, src, bytes, cudaMemcpyDeviceToHost), what);
      std::memcpy(m.data(), pinned_, bytes);
    };
    down(fac_delta_[static_cast<size_t>(i)], grad_.p, li.out.size(), "download factor deltas");
    down(fac_input_[static_cast<size_t>(i)], acts_[static_cast<size_t>(i)].p, li.in.size(), "download factor inputs");
    return true;
  }

  void stage(size_t bytes) {
    if (bytes <= pinned_bytes_) return;
    if (pinned_) cudaFreeHost(pinned_);
    pinned_ = nullptr;
    check(cudaMallocHost(reinterpret_cast<void**>(&pinned_), bytes), "cudaMallocHost");
    pinned_bytes_ = bytes;
  }

  float* param(int i, int k) { return params_[static_cast<size_t>(i)][static_cast<size_t>(k)].p; }
  float* grad(int i, int k) { return grads_[static_cast<size_t>(i)][static_cast<size_t>(k)].p; }

  void forward_layer(int i) {
    const LayerInfo li = net_.layer(i).info();
    const LayerPlan& p = *(*plan_)[static_cast<size_t>(i)];
    const float* x = acts_[static_cast<size_t>(i)].p;
    DevBuf<float>& y = acts_[static_cast<size_t>(i) + 1];
    y.resize(static_cast<size_t>(n_ * li.out.size()));
    switch (li.kind) {
      case LayerInfo::Kind::kConv:
        check(cudnnConvolutionForward(dnn_, &kOne, p.x.get(), x, p.w.get(), param(i, 0), p.conv.get(), p.fwd,
                                      workspace_.p, p.workspace, &kZero, p.y.get(), y.p),
              "convolution forward");
        check(cudnnAddTensor(dnn_, &kOne, p.bias.get(), param(i, 1), &kOne, p.y.get(), y.p), "convolution bias");
        break;
      case LayerInfo::Kind::kRelu:
        check(cudnnActivationForward(dnn_, p.act.get(), &kOne, p.x.get(), x, &kZero, p.y.get(), y.p), "ReLU forward");
        break;
      case LayerInfo::Kind::kPool:
        check(cudnnPoolingForward(dnn_, p.pool.get(), &kOne, p.x.get(), x, &kZero, p.y.get(), y.p), "pooling forward");
        break;
      case LayerInfo::Kind::kLinear: {
        const int out = li.out.c, in = static_cast<int>(li.in.size());
        // Y (n x out) = X (n x in) W^T: column-major Y^T (out x n) = W (op T of W^T) X^T.
        check(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, out, static_cast<int>(n_), in, &kOne, param(i, 0), in, x, in,
                          &kZero, y.p, out),
              "linear forward GEMM");
        check(cudnnAddTensor(dnn_, &kOne, p.bias.get(), param(i, 1), &kOne, p.y.get(), y.p), "linear bias");
        break;
      }
    }
  }

  void backward_conv(int i, const LayerPlan& p, const float* x, const float* dy, float* dx) {
    check(cudnnConvolutionBackwardFilter(dnn_, &kOne, p.x.get(), x, p.y.get(), dy, p.conv.get(), p.bwd_filter,
                                         workspace_.p, p.workspace, &kZero, p.w.get(), grad(i, 0)),
          "convolution filter gradient");
    check(cudnnConvolutionBackwardBias(dnn_, &kOne, p.y.get(), dy, &kZero, p.bias.get(), grad(i, 1)),
          "convolution bias gradient");
    if (dx)
      check(cudnnConvolutionBackwardData(dnn_, &kOne, p.w.get(), param(i, 0), p.y.get(), dy, p.conv.get(), p.bwd_data,
                                         workspace_.p, p.workspace, &kZero, p.x.get(), dx),
            "convolution data gradient");
  }

  void backward_linear(int i, const LayerInfo& li, const LayerPlan& p, const float* x, const float* dy, float* dx) {
    const int out = li.out.c, in = static_cast<int>(li.in.size()), n = static_cast<int>(n_);
    // A factor layer's gradients are rebuilt from every rank's factors on the host.
    if (!factor_layer_[static_cast<size_t>(i)]) {
      // dW (out x in) = dY^T X: column-major dW^T (in x out) = X^T (in x n) dY (n x out).
      check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &kOne, x, in, dy, out, &kZero, grad(i, 0), in),
            "linear weight gradient GEMM");
      check(cudnnConvolutionBackwardBias(dnn_, &kOne, p.y.get(), dy, &kZero, p.bias.get(), grad(i, 1)),
            "linear bias gradient");
    }
    if (dx)
      // dX (n x in) = dY W: column-major dX^T (in x n) = W^T (in x out) dY^T (out x n).
      check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &kOne, param(i, 0), in, dy, out, &kZero, dx, in),
            "linear input gradient GEMM");
  }

  void backward_layer(int i, bool need_dx) {
    const LayerInfo li = net_.layer(i).info();
    const LayerPlan& p = *(*plan_)[static_cast<size_t>(i)];
    const float* x = acts_[static_cast<size_t>(i)].p;
    const float* y = acts_[static_cast<size_t>(i) + 1].p;
    grad_next_.resize(static_cast<size_t>(n_ * li.in.size()));
    const float* dy = grad_.p;
    float* dx = need_dx ? grad_next_.p : nullptr;
    switch (li.kind) {
      case LayerInfo::Kind::kConv: backward_conv(i, p, x, dy, dx); break;
      case LayerInfo::Kind::kLinear: backward_linear(i, li, p, x, dy, dx); break;
      case LayerInfo::Kind::kRelu:
        if (dx)
          check(cudnnActivationBackward(dnn_, p.act.get(), &kOne, p.y.get(), y, p.y.get(), dy, p.x.get(), x, &kZero,
                                        p.x.get(), dx),
                "ReLU backward");
        break;
      case LayerInfo::Kind::kPool:
        if (dx)
          check(cudnnPoolingBackward(dnn_, p.pool.get(), &kOne, p.y.get(), y, p.y.get(), dy, p.x.get(), x, &kZero,
                                     p.x.get(), dx),
                "pooling backward");
        break;
    }
  }

  Network& net_;
  cublasHandle_t blas_ = nullptr;
  cudnnHandle_t dnn_ = nullptr;
  int64_t n_ = 0;
  std::map<int64_t, std::vector<std::unique_ptr<LayerPlan>>> plans_;  // by batch size
  std::vector<std::unique_ptr<LayerPlan>>* plan_ = nullptr;           // of the last forward()
  DevBuf<char> workspace_;
  std::vector<DevBuf<float>> acts_;
  std::vector<std::vector<DevBuf<float>>> params_, grads_;
  DevBuf<float> grad_, grad_next_, loss_;
  DevBuf<int> labels_;
  Matrix logits_;
  std::vector<char> factor_layer_;             // by layer: sends factors (set_factor_layers)
  std::vector<Matrix> fac_delta_, fac_input_;  // by layer: host copies of its factors
  float* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
};

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = fmt::format("no CUDA device answers (cudaGetDeviceCount: {})", cudaGetErrorString(e));
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device answers (cudaGetDeviceCount: 0 devices)";
  return n;
}

std::string library_versions() {
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  const size_t dnn = cudnnGetVersion();  // major * 10000 + minor * 100 + patch (cuDNN 9)
  return fmt::format("CUDA runtime {}.{}, cuDNN {}.{}.{}", rt / 1000, (rt % 1000) / 10, dnn / 10000, dnn / 100 % 100,
                     dnn % 100);
}

std::unique_ptr<DeviceBackend> make_backend(Network& net, int local_rank) {
  std::string why;
  const int n = device_count(&why);
  if (n == 0) throw InvalidArgument("device = \"cuda\": " + why);
  return std::make_unique<CudaBackend>(net, local_rank % n);
}

}  // namespace

}  // namespace sfb::cnn::cuda

extern "C" const sfb::cnn::cuda::ModuleTable* sfb_cuda_module() {
  namespace c = sfb::cnn::cuda;
  static const c::ModuleTable table{c::kModuleAbi, &c::device_count, &c::library_versions, &c::make_backend};
  return &table;
}
