#pragma once
// What the CPU layer implementations share (layer.cc: the reference kernels; onednn_layers.cc:
// oneDNN and BLAS): weight and bias storage, initialisation, output shapes, and each kind's name
// and shapes. Internal to cnn/.
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "sfb/cnn/layer.h"
#include "sfb/core/error.h"

namespace sfb::cnn::detail {

// He initialisation for layers followed by ReLU: N(0, 2 / fan_in).
inline void he_init(Matrix& w, int64_t fan_in, Rng& rng) {
  std::normal_distribution<float> g(0.0f, std::sqrt(2.0f / static_cast<float>(fan_in)));
  for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = g(rng);
}

// A layer with a weight matrix W (outputs x fan-in, He-initialised) and a bias row b, and their
// gradients.
class WeightBiasLayer : public Layer {
 public:
  WeightBiasLayer(Shape in, Shape out, int64_t fan_in) : in_(in), out_(out) {
    W_.resize(out.c, fan_in);
    b_ = Matrix::Zero(1, out.c);
    dW_ = Matrix::Zero(W_.rows(), W_.cols());
    db_ = Matrix::Zero(1, out.c);
  }
  Shape in_shape() const override { return in_; }
  Shape out_shape() const override { return out_; }
  void init(Rng& rng) override {
    he_init(W_, W_.cols(), rng);
    b_.setZero();
  }
  std::vector<Matrix*> params() override { return {&W_, &b_}; }
  std::vector<Matrix*> grads() override { return {&dW_, &db_}; }

 protected:
  Shape in_, out_;
  Matrix W_, b_, dW_, db_;
};

inline Shape conv_out(Shape in, int out_c, int k, int pad) {
  const Shape out{out_c, in.h + 2 * pad - k + 1, in.w + 2 * pad - k + 1};
  SFB_CHECK(out_c >= 1 && k >= 1 && pad >= 0 && out.h >= 1 && out.w >= 1, "conv:{}:{}:{} does not fit a {}x{}x{} input",
            out_c, k, pad, in.c, in.h, in.w);
  return out;
}

inline Shape fc_out(int outputs) {
  SFB_CHECK(outputs >= 1, "fc:{}: outputs must be >= 1", outputs);
  return {outputs, 1, 1};
}

inline Shape pool_out(Shape in, int k) {
  const Shape out{in.c, k >= 1 ? in.h / k : 0, k >= 1 ? in.w / k : 0};
  SFB_CHECK(k >= 1 && out.h >= 1 && out.w >= 1, "pool:{} does not fit a {}x{}x{} input", k, in.c, in.h, in.w);
  return out;
}

// ReLU's name and shapes (output = input); the implementations add forward and backward.
class ReluLayer : public Layer {
 public:
  explicit ReluLayer(Shape in) : in_(in) {}
  std::string name() const override { return "relu"; }
  LayerInfo info() const override { return {LayerInfo::Kind::kRelu, in_, in_, 0, 0}; }
  Shape in_shape() const override { return in_; }
  Shape out_shape() const override { return in_; }

 protected:
  Shape in_;
};

// k x k max pooling's name and shapes (stride k, output rounded down).
class MaxPoolLayer : public Layer {
 public:
  MaxPoolLayer(Shape in, int k) : in_(in), k_(k), out_(pool_out(in, k)) {}
  std::string name() const override { return fmt::format("pool{}", k_); }
  LayerInfo info() const override { return {LayerInfo::Kind::kPool, in_, out_, k_, 0}; }
  Shape in_shape() const override { return in_; }
  Shape out_shape() const override { return out_; }

 protected:
  Shape in_;
  int k_;
  Shape out_;
};

}  // namespace sfb::cnn::detail
