#pragma once
// Layers of the data-parallel CNN (MG-WFBP mode). A batch of activations is a row-major Matrix,
// one sample per row, features in C x H x W order. forward() keeps what backward() needs;
// backward() writes the parameter gradients (overwriting, not accumulating) and, when asked, the
// input gradient. Two CPU implementations of every layer (cnn.kernels):
//   * onednn (default): convolution, max pooling and ReLU through oneDNN (the library PyTorch uses
//     on CPU; its kernels are chosen for the CPU at run time), fully connected layers through the
//     BLAS of core/gemm.h;
//   * reference: per-sample im2col + Eigen GEMM and plain loops, the independent implementation
//     the oneDNN layers are tested against.
//
// Threads: one training thread calls forward/backward; the communication thread reads grads()
// of a layer only after backward() of that layer has returned (the executor's ready queue orders
// them), and writes them back (the averaged gradient) before the update.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sfb/core/rng.h"
#include "sfb/core/tensor.h"

namespace sfb::cnn {

struct Shape {
  int c = 0, h = 0, w = 0;
  int64_t size() const { return int64_t{c} * h * w; }
  bool operator==(const Shape& o) const { return c == o.c && h == o.h && w == o.w; }
};

// What a layer is, for device backends that implement the same layer elsewhere.
struct LayerInfo {
  enum class Kind { kConv, kRelu, kPool, kLinear };
  Kind kind = Kind::kRelu;
  Shape in, out;
  int kernel = 0;  // conv, pool
  int pad = 0;     // conv
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string name() const = 0;
  virtual LayerInfo info() const = 0;
  virtual Shape in_shape() const = 0;
  virtual Shape out_shape() const = 0;
  virtual void init(Rng& rng) { (void)rng; }
  virtual void forward(const Matrix& x, Matrix& y) = 0;
  // dy: gradient of the loss w.r.t. y; dx (when not null): w.r.t. x.
  virtual void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx) = 0;
  virtual std::vector<Matrix*> params() { return {}; }
  virtual std::vector<Matrix*> grads() { return {}; }
  // Whether backward() writes the parameter gradients (default: yes). A fully connected layer whose
  // gradient travels as sufficient factors skips them (every rank rebuilds them from the factors);
  // layers without factors ignore this.
  virtual void set_param_grads(bool on) { (void)on; }
  int64_t param_count();
};

enum class Kernels { kOneDnn, kReference };
// "onednn" or "reference" (cnn.kernels).
Kernels parse_kernels(const std::string& name);

// conv:<out channels>:<kernel>[:<pad>], stride 1.
std::unique_ptr<Layer> make_conv2d(Shape in, int out_channels, int kernel, int pad, Kernels kernels);
std::unique_ptr<Layer> make_relu(Shape in, Kernels kernels);
// pool:<k>: k x k max pooling with stride k (the input is cropped to a multiple of k).
std::unique_ptr<Layer> make_maxpool(Shape in, int k, Kernels kernels);
// fc:<outputs>
std::unique_ptr<Layer> make_linear(Shape in, int outputs, Kernels kernels);

// Mean softmax cross-entropy of logits (N x classes) against labels; dlogits = (p - onehot) / N.
double softmax_cross_entropy(const Matrix& logits, const std::vector<int32_t>& labels, Matrix* dlogits);

}  // namespace sfb::cnn
