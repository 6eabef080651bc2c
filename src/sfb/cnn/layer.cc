#include "sfb/cnn/layer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "sfb/cnn/layer_parts.h"
#include "sfb/cnn/onednn_layers.h"
#include "sfb/core/error.h"

namespace sfb::cnn {

int64_t Layer::param_count() {
  int64_t n = 0;
  for (Matrix* p : params()) n += p->size();
  return n;
}

namespace {

using detail::conv_out;
using detail::fc_out;
using detail::MaxPoolLayer;
using detail::ReluLayer;
using detail::WeightBiasLayer;

class Conv2d final : public WeightBiasLayer {
 public:
  Conv2d(Shape in, int out_c, int k, int pad)
      : WeightBiasLayer(in, conv_out(in, out_c, k, pad), int64_t{in.c} * k * k), k_(k), pad_(pad) {}
  std::string name() const override { return fmt::format("conv{}x{}x{}", out_.c, k_, k_); }
  LayerInfo info() const override { return {LayerInfo::Kind::kConv, in_, out_, k_, pad_}; }

  void forward(const Matrix& x, Matrix& y) override {
    const int64_t n = x.rows(), hw = int64_t{out_.h} * out_.w;
    cols_.resize(n);
    y.resize(n, out_.size());
    for (int64_t i = 0; i < n; ++i) {
      im2col(x.row(i).data(), cols_[static_cast<size_t>(i)]);
      Eigen::Map<Matrix> yi(y.row(i).data(), out_.c, hw);
      yi.noalias() = W_ * cols_[static_cast<size_t>(i)];
      yi.colwise() += b_.row(0).transpose();
    }
  }

  void backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx) override {
    const int64_t n = x.rows(), hw = int64_t{out_.h} * out_.w;
    dW_.setZero();
    db_.setZero();
    if (dx) dx->setZero(n, in_.size());
    Matrix dcol;
    for (int64_t i = 0; i < n; ++i) {
      Eigen::Map<const Matrix> dyi(dy.row(i).data(), out_.c, hw);
      dW_.noalias() += dyi * cols_[static_cast<size_t>(i)].transpose();
      db_.row(0) += dyi.rowwise().sum().transpose();
      if (dx) {
        dcol.noalias() = W_.transpose() * dyi;
        col2im(dcol, dx->row(i).data());
      }
    }
  }

 private:
  // col: (C k k) x (out_h out_w); row (c, ky, kx), column (oy, ox) = x[c, oy + ky - pad, ox + kx - pad].
  void im2col(const float* x, Matrix& col) const {
    col.resize(int64_t{in_.c} * k_ * k_, int64_t{out_.h} * out_.w);
    for (int c = 0; c < in_.c; ++c)
      for (int ky = 0; ky < k_; ++ky)
        for (int kx = 0; kx < k_; ++kx) {
          float* dst = col.row((int64_t{c} * k_ + ky) * k_ + kx).data();
          for (int oy = 0; oy < out_.h; ++oy) {
            const int iy = oy + ky - pad_;
            for (int ox = 0; ox < out_.w; ++ox) {
              const int ix = ox + kx - pad_;
              dst[oy * out_.w + ox] =
                  (iy >= 0 && iy < in_.h && ix >= 0 && ix < in_.w) ? x[(int64_t{c} * in_.h + iy) * in_.w + ix] : 0.0f;
            }
          }
        }
  }
  void col2im(const Matrix& col, float* dx) const {
    for (int c = 0; c < in_.c; ++c)
      for (int ky = 0; ky < k_; ++ky)
        for (int kx = 0; kx < k_; ++kx) {
          const float* src = col.row((int64_t{c} * k_ + ky) * k_ + kx).data();
          for (int oy = 0; oy < out_.h; ++oy) {
            const int iy = oy + ky - pad_;
            if (iy < 0 || iy >= in_.h) continue;
            for (int ox = 0; ox < out_.w; ++ox) {
              const int ix = ox + kx - pad_;
              if (ix >= 0 && ix < in_.w) dx[(int64_t{c} * in_.h + iy) * in_.w + ix] += src[oy * out_.w + ox];
            }
          }
        }
  }

  int k_, pad_;
  std::vector<Matrix> cols_;  // per sample, from forward
};

class Relu final : public ReluLayer {
 public:
  using ReluLayer::ReluLayer;
  void forward(const Matrix& x, Matrix& y) override { y = x.cwiseMax(0.0f); }
  void backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx) override {
    if (dx) *dx = (x.array() > 0.0f).select(dy, 0.0f);
  }
};

class MaxPool final : public MaxPoolLayer {
 public:
  using MaxPoolLayer::MaxPoolLayer;
  void forward(const Matrix& x, Matrix& y) override {
    const int64_t n = x.rows();
    y.resize(n, out_.size());
    arg_.resize(static_cast<size_t>(n * out_.size()));
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x.row(i).data();
      float* yi = y.row(i).data();
      for (int c = 0; c < out_.c; ++c)
        for (int oy = 0; oy < out_.h; ++oy)
          for (int ox = 0; ox < out_.w; ++ox) {
            float best = -std::numeric_limits<float>::infinity();
            int32_t at = 0;
            for (int dy = 0; dy < k_; ++dy)
              for (int dx = 0; dx < k_; ++dx) {
                const int32_t idx = (c * in_.h + oy * k_ + dy) * in_.w + ox * k_ + dx;
                if (xi[idx] > best) {
                  best = xi[idx];
                  at = idx;
                }
              }
            const int64_t o = (int64_t{c} * out_.h + oy) * out_.w + ox;
            yi[o] = best;
            arg_[static_cast<size_t>(i * out_.size() + o)] = at;
          }
    }
  }
  void backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx) override {
    if (!dx) return;
    dx->setZero(x.rows(), in_.size());
    for (int64_t i = 0; i < x.rows(); ++i)
      for (int64_t o = 0; o < out_.size(); ++o) (*dx)(i, arg_[static_cast<size_t>(i * out_.size() + o)]) += dy(i, o);
  }

 private:
  std::vector<int32_t> arg_;
};

class Linear final : public WeightBiasLayer {
 public:
  Linear(Shape in, int outputs) : WeightBiasLayer(in, fc_out(outputs), in.size()) {}
  std::string name() const override { return fmt::format("fc{}", out_.c); }
  LayerInfo info() const override { return {LayerInfo::Kind::kLinear, in_, out_, 0, 0}; }
  void forward(const Matrix& x, Matrix& y) override {
    y.noalias() = x * W_.transpose();
    y.rowwise() += b_.row(0);
  }
  void backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx) override {
    if (param_grads_) {
      dW_.noalias() = dy.transpose() * x;
      db_.row(0) = dy.colwise().sum();
    }
    if (dx) dx->noalias() = dy * W_;
  }
  void set_param_grads(bool on) override { param_grads_ = on; }

 private:
  bool param_grads_ = true;
};

}  // namespace

Kernels parse_kernels(const std::string& name) {
  if (name == "onednn") return Kernels::kOneDnn;
  SFB_CHECK(name == "reference", "cnn.kernels must be \"onednn\" or \"reference\", got \"{}\"", name);
  return Kernels::kReference;
}

std::unique_ptr<Layer> make_conv2d(Shape in, int out_channels, int kernel, int pad, Kernels kernels) {
  if (kernels == Kernels::kOneDnn) return make_onednn_conv2d(in, out_channels, kernel, pad);
  return std::make_unique<Conv2d>(in, out_channels, kernel, pad);
}
std::unique_ptr<Layer> make_relu(Shape in, Kernels kernels) {
  if (kernels == Kernels::kOneDnn) return make_onednn_relu(in);
  return std::make_unique<Relu>(in);
}
std::unique_ptr<Layer> make_maxpool(Shape in, int k, Kernels kernels) {
  if (kernels == Kernels::kOneDnn) return make_onednn_maxpool(in, k);
  return std::make_unique<MaxPool>(in, k);
}
std::unique_ptr<Layer> make_linear(Shape in, int outputs, Kernels kernels) {
  if (kernels == Kernels::kOneDnn) return make_blas_linear(in, outputs);
  return std::make_unique<Linear>(in, outputs);
}

double softmax_cross_entropy(const Matrix& logits, const std::vector<int32_t>& labels, Matrix* dlogits) {
  const int64_t n = logits.rows();
  SFB_ENFORCE(static_cast<int64_t>(labels.size()) == n, "{} labels for {} rows", labels.size(), n);
  double loss = 0.0;
  if (dlogits) dlogits->resize(n, logits.cols());
  for (int64_t i = 0; i < n; ++i) {
    const float m = logits.row(i).maxCoeff();
    const Eigen::ArrayXf e = (logits.row(i).array() - m).exp().transpose();
    const float s = e.sum();
    const int32_t y = labels[static_cast<size_t>(i)];
    SFB_ENFORCE(y >= 0 && y < logits.cols(), "label {} of {} classes", y, logits.cols());
    loss += -(static_cast<double>(logits(i, y) - m) - std::log(static_cast<double>(s)));
    if (dlogits) {
      dlogits->row(i) = (e / s).matrix().transpose();
      (*dlogits)(i, y) -= 1.0f;
    }
  }
  if (dlogits && n > 0) *dlogits /= static_cast<float>(n);
  return n > 0 ? loss / static_cast<double>(n) : 0.0;
}

}  // namespace sfb::cnn
