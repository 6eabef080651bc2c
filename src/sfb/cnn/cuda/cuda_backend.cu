// CUDA backend of the MG-WFBP network: the same layers as src/sfb/cnn/layer.cc, on a GPU.
// Activations live on the device for a whole iteration; parameters are uploaded after each host
// update (params_changed), and each param layer's gradients are downloaded into the host copies
// (pinned staging) before the layer is reported ready to the communication thread, which
// all-reduces host buffers over MPI.
//
// Layouts match the CPU layers: row-major, one sample per row, C x H x W. cuBLAS is column-major:
// a row-major M (r x c) is the column-major M^T (c x r), and the GEMMs below are written that way.
#include "sfb/cnn/cuda/cuda_backend.h"

#include <chrono>
#include <cstring>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
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

// A device buffer of floats (or ints), grown on demand.
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

constexpr int kThreads = 256;
inline int blocks(int64_t n) { return static_cast<int>(std::max<int64_t>(1, (n + kThreads - 1) / kThreads)); }

__global__ void im2col_kernel(const float* x, float* col, int C, int H, int W, int k, int pad, int OH, int OW) {
  // col (C k k) x (OH OW) of one sample.
  const int64_t total = static_cast<int64_t>(C) * k * k * OH * OW;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int ox = static_cast<int>(i % OW);
    const int oy = static_cast<int>((i / OW) % OH);
    const int64_t row = i / (static_cast<int64_t>(OW) * OH);
    const int kx = static_cast<int>(row % k), ky = static_cast<int>((row / k) % k), c = static_cast<int>(row / (k * k));
    const int iy = oy + ky - pad, ix = ox + kx - pad;
    col[i] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? x[(static_cast<int64_t>(c) * H + iy) * W + ix] : 0.0f;
  }
}

__global__ void col2im_kernel(const float* col, float* dx, int C, int H, int W, int k, int pad, int OH, int OW) {
  // Each input element gathers the column entries that read it (no atomics).
  const int64_t total = static_cast<int64_t>(C) * H * W;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int ix = static_cast<int>(i % W), iy = static_cast<int>((i / W) % H),
              c = static_cast<int>(i / (static_cast<int64_t>(W) * H));
    float s = 0.0f;
    for (int ky = 0; ky < k; ++ky) {
      const int oy = iy - ky + pad;
      if (oy < 0 || oy >= OH) continue;
      for (int kx = 0; kx < k; ++kx) {
        const int ox = ix - kx + pad;
        if (ox < 0 || ox >= OW) continue;
        s += col[((static_cast<int64_t>(c) * k + ky) * k + kx) * OH * OW + static_cast<int64_t>(oy) * OW + ox];
      }
    }
    dx[i] = s;
  }
}

// y[n, c, :] += b[c] for rows of `per_row` = C * inner.
__global__ void add_bias_kernel(float* y, const float* b, int64_t n, int C, int64_t inner) {
  const int64_t total = n * C * inner;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] += b[(i / inner) % C];
}

// db[c] = sum over n and inner of dy[n, c, :].
__global__ void bias_grad_kernel(const float* dy, float* db, int64_t n, int C, int64_t inner) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < inner; ++j) s += dy[(r * C + c) * inner + j];
    db[c] = s;
  }
}

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
__global__ void relu_back_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void maxpool_kernel(const float* x, float* y, int* arg, int64_t n, int C, int H, int W, int k, int OH,
                               int OW) {
  const int64_t total = n * C * OH * OW;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int ox = static_cast<int>(i % OW), oy = static_cast<int>((i / OW) % OH);
    const int c = static_cast<int>((i / (static_cast<int64_t>(OW) * OH)) % C);
    const int64_t s = i / (static_cast<int64_t>(OW) * OH * C);
    const float* xs = x + s * C * H * W;
    float best = -3.4e38f;
    int at = 0;
    for (int dy = 0; dy < k; ++dy)
      for (int dx = 0; dx < k; ++dx) {
        const int idx = (c * H + oy * k + dy) * W + ox * k + dx;
        if (xs[idx] > best) {
          best = xs[idx];
          at = idx;
        }
      }
    y[i] = best;
    arg[i] = at;
  }
}
__global__ void maxpool_back_kernel(const float* dy, const int* arg, float* dx, int64_t n, int64_t out_per,
                                    int64_t in_per) {
  // Windows do not overlap (stride = k): every input receives at most one output's gradient.
  const int64_t total = n * out_per;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dx[(i / out_per) * in_per + arg[i]] = dy[i];
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

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(Network& net, int device) : net_(net) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cublasCreate(&blas_), "cublasCreate");
    const int L = net.layers();
    acts_.resize(static_cast<size_t>(L) + 1);
    args_.resize(static_cast<size_t>(L));
    cols_.resize(static_cast<size_t>(L));
    params_.resize(static_cast<size_t>(L));
    grads_.resize(static_cast<size_t>(L));
    for (int i = 0; i < L; ++i) {
      auto ps = net.layer(i).params();
      for (Matrix* m : ps) {
        params_[static_cast<size_t>(i)].emplace_back(std::make_unique<DevBuf<float>>());
        params_[static_cast<size_t>(i)].back()->resize(static_cast<size_t>(m->size()));
        grads_[static_cast<size_t>(i)].emplace_back(std::make_unique<DevBuf<float>>());
        grads_[static_cast<size_t>(i)].back()->resize(static_cast<size_t>(m->size()));
      }
    }
    params_changed();
  }
  ~CudaBackend() override {
    if (pinned_) cudaFreeHost(pinned_);
    cublasDestroy(blas_);
  }
  std::string name() const override { return "cuda"; }

  void params_changed() override {
    for (int i = 0; i < net_.layers(); ++i) {
      auto ps = net_.layer(i).params();
      for (size_t k = 0; k < ps.size(); ++k)
        check(cudaMemcpy(params_[static_cast<size_t>(i)][k]->p, ps[k]->data(),
                         static_cast<size_t>(ps[k]->size()) * sizeof(float), cudaMemcpyHostToDevice),
              "upload parameters");
    }
  }

  const Matrix& forward(const Matrix& x) override {
    n_ = x.rows();
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
    if (layer_us) layer_us->assign(static_cast<size_t>(net_.layers()), 0.0);
    for (int i = net_.layers() - 1; i >= 0; --i) {
      const auto t0 = std::chrono::steady_clock::now();
      backward_layer(i, i > 0);
      auto ps = net_.layer(i).grads();
      if (!ps.empty()) {
        // Host copies of this layer's gradients, through pinned memory, before it is reported ready.
        for (size_t k = 0; k < ps.size(); ++k) {
          const size_t bytes = static_cast<size_t>(ps[k]->size()) * sizeof(float);
          stage(bytes);
          check(cudaMemcpy(pinned_, grads_[static_cast<size_t>(i)][k]->p, bytes, cudaMemcpyDeviceToHost),
                "download gradients");
          std::memcpy(ps[k]->data(), pinned_, bytes);
        }
      } else {
        check(cudaDeviceSynchronize(), "backward");
      }
      if (layer_us)
        (*layer_us)[static_cast<size_t>(i)] =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (!ps.empty() && on_ready) on_ready(net_.owner_param_layer(i));
      if (i > 0) std::swap(grad_.p, grad_next_.p), std::swap(grad_.n, grad_next_.n);
    }
    return n_ > 0 ? loss / static_cast<double>(n_) : 0.0;
  }

 private:
  void stage(size_t bytes) {
    if (bytes <= pinned_bytes_) return;
    if (pinned_) cudaFreeHost(pinned_);
    check(cudaMallocHost(reinterpret_cast<void**>(&pinned_), bytes), "cudaMallocHost");
    pinned_bytes_ = bytes;
  }

  // Row-major C (m x n) = op(A) op(B), written for cuBLAS's column-major view (C^T = op(B)^T op(A)^T).
  void forward_layer(int i) {
    const LayerInfo li = net_.layer(i).info();
    const int64_t in_per = li.in.size(), out_per = li.out.size();
    DevBuf<float>& x = acts_[static_cast<size_t>(i)];
    DevBuf<float>& y = acts_[static_cast<size_t>(i) + 1];
    y.resize(static_cast<size_t>(n_ * out_per));
    const float one = 1.0f, zero = 0.0f;
    switch (li.kind) {
      case LayerInfo::Kind::kConv: {
        const int k = li.kernel, hw = li.out.h * li.out.w, ckk = li.in.c * k * k, oc = li.out.c;
        DevBuf<float>& col = cols_[static_cast<size_t>(i)];
        col.resize(static_cast<size_t>(n_) * ckk * hw);
        for (int64_t s = 0; s < n_; ++s)
          im2col_kernel<<<blocks(int64_t{ckk} * hw), kThreads>>>(x.p + s * in_per, col.p + s * ckk * hw, li.in.c,
                                                                 li.in.h, li.in.w, k, li.pad, li.out.h, li.out.w);
        check(cudaGetLastError(), "im2col_kernel");
        // Y_s (oc x hw) = W (oc x ckk) col_s (ckk x hw): column-major Y^T = col^T W^T.
        check(cublasSgemmStridedBatched(blas_, CUBLAS_OP_N, CUBLAS_OP_N, hw, oc, ckk, &one, col.p, hw,
                                        int64_t{ckk} * hw, params_[static_cast<size_t>(i)][0]->p, ckk, 0, &zero, y.p,
                                        hw, int64_t{oc} * hw, static_cast<int>(n_)),
              "conv forward GEMM");
        add_bias_kernel<<<blocks(n_ * out_per), kThreads>>>(y.p, params_[static_cast<size_t>(i)][1]->p, n_, oc, hw);
        break;
      }
      case LayerInfo::Kind::kRelu: relu_kernel<<<blocks(n_ * out_per), kThreads>>>(x.p, y.p, n_ * out_per); break;
      case LayerInfo::Kind::kPool: {
        DevBuf<int>& arg = args_[static_cast<size_t>(i)];
        arg.resize(static_cast<size_t>(n_ * out_per));
        maxpool_kernel<<<blocks(n_ * out_per), kThreads>>>(x.p, y.p, arg.p, n_, li.in.c, li.in.h, li.in.w, li.kernel,
                                                           li.out.h, li.out.w);
        break;
      }
      case LayerInfo::Kind::kLinear: {
        const int out = li.out.c, in = static_cast<int>(in_per);
        // Y (n x out) = X (n x in) W^T: column-major Y^T (out x n) = W (op T of W^T) X^T.
        check(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, out, static_cast<int>(n_), in, &one,
                          params_[static_cast<size_t>(i)][0]->p, in, x.p, in, &zero, y.p, out),
              "linear forward GEMM");
        add_bias_kernel<<<blocks(n_ * out), kThreads>>>(y.p, params_[static_cast<size_t>(i)][1]->p, n_, out, 1);
        break;
      }
    }
    check(cudaGetLastError(), "forward kernel");
  }

  void backward_layer(int i, bool need_dx) {
    const LayerInfo li = net_.layer(i).info();
    const int64_t in_per = li.in.size(), out_per = li.out.size();
    DevBuf<float>& x = acts_[static_cast<size_t>(i)];
    const float one = 1.0f, zero = 0.0f;
    grad_next_.resize(static_cast<size_t>(n_ * in_per));
    float* dy = grad_.p;
    float* dx = grad_next_.p;
    switch (li.kind) {
      case LayerInfo::Kind::kConv: {
        const int k = li.kernel, hw = li.out.h * li.out.w, ckk = li.in.c * k * k, oc = li.out.c;
        DevBuf<float>& col = cols_[static_cast<size_t>(i)];
        float* dW = grads_[static_cast<size_t>(i)][0]->p;
        // dW (oc x ckk) = sum_s dY_s (oc x hw) col_s^T: column-major dW^T = col_s (ckk x hw) dY_s^T.
        check(cudaMemset(dW, 0, static_cast<size_t>(oc) * ckk * sizeof(float)), "memset");
        for (int64_t s = 0; s < n_; ++s)
          check(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, ckk, oc, hw, &one, col.p + s * ckk * hw, hw,
                            dy + s * out_per, hw, &one, dW, ckk),
                "conv weight gradient GEMM");
        bias_grad_kernel<<<blocks(oc), kThreads>>>(dy, grads_[static_cast<size_t>(i)][1]->p, n_, oc, hw);
        if (need_dx) {
          // dcol_s (ckk x hw) = W^T dY_s: column-major dcol^T (hw x ckk) = dY_s^T (hw x oc) W (oc x ckk).
          dcol_.resize(static_cast<size_t>(n_) * ckk * hw);
          check(cublasSgemmStridedBatched(blas_, CUBLAS_OP_N, CUBLAS_OP_T, hw, ckk, oc, &one, dy, hw, out_per,
                                          params_[static_cast<size_t>(i)][0]->p, ckk, 0, &zero, dcol_.p, hw,
                                          int64_t{ckk} * hw, static_cast<int>(n_)),
                "conv input gradient GEMM");
          for (int64_t s = 0; s < n_; ++s)
            col2im_kernel<<<blocks(in_per), kThreads>>>(dcol_.p + s * ckk * hw, dx + s * in_per, li.in.c, li.in.h,
                                                        li.in.w, k, li.pad, li.out.h, li.out.w);
        }
        break;
      }
      case LayerInfo::Kind::kRelu:
        if (need_dx) relu_back_kernel<<<blocks(n_ * in_per), kThreads>>>(x.p, dy, dx, n_ * in_per);
        break;
      case LayerInfo::Kind::kPool:
        if (need_dx) {
          check(cudaMemset(dx, 0, static_cast<size_t>(n_ * in_per) * sizeof(float)), "memset");
          maxpool_back_kernel<<<blocks(n_ * out_per), kThreads>>>(dy, args_[static_cast<size_t>(i)].p, dx, n_, out_per,
                                                                  in_per);
        }
        break;
      case LayerInfo::Kind::kLinear: {
        const int out = li.out.c, in = static_cast<int>(in_per);
        // dW (out x in) = dY^T X: column-major dW^T (in x out) = X^T (in x n) dY (n x out).
        check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, in, out, static_cast<int>(n_), &one, x.p, in, dy, out, &zero,
                          grads_[static_cast<size_t>(i)][0]->p, in),
              "linear weight gradient GEMM");
        bias_grad_kernel<<<blocks(out), kThreads>>>(dy, grads_[static_cast<size_t>(i)][1]->p, n_, out, 1);
        if (need_dx)
          // dX (n x in) = dY W: column-major dX^T (in x n) = W^T (in x out) dY^T (out x n).
          check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, in, static_cast<int>(n_), out, &one,
                            params_[static_cast<size_t>(i)][0]->p, in, dy, out, &zero, dx, in),
                "linear input gradient GEMM");
        break;
      }
    }
    check(cudaGetLastError(), "backward kernel");
  }

  Network& net_;
  cublasHandle_t blas_ = nullptr;
  int64_t n_ = 0;
  std::vector<DevBuf<float>> acts_, cols_;
  std::vector<DevBuf<int>> args_;
  std::vector<std::vector<std::unique_ptr<DevBuf<float>>>> params_, grads_;
  DevBuf<float> grad_, grad_next_, dcol_, loss_;
  DevBuf<int> labels_;
  Matrix logits_;
  float* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
};

}  // namespace

bool built() { return true; }

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

std::unique_ptr<DeviceBackend> make_backend(Network& net, int local_rank) {
  std::string why;
  const int n = device_count(&why);
  if (n == 0) throw InvalidArgument("device = \"cuda\": " + why);
  return std::make_unique<CudaBackend>(net, local_rank % n);
}

}  // namespace sfb::cnn::cuda
