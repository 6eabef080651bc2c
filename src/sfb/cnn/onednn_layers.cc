#include "sfb/cnn/onednn_layers.h"

#include <fmt/format.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <optional>

#include "sfb/cnn/layer_parts.h"
#include "sfb/core/gemm.h"

namespace sfb::cnn {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

// One engine and one stream per training thread (a stream is not shared between threads).
struct Device {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};
Device& device() {
  thread_local Device d;
  return d;
}

memory::desc nchw(int64_t n, Shape s) { return {{n, s.c, s.h, s.w}, Dt::f32, Tag::nchw}; }
memory::desc any4(int64_t n, Shape s) { return {{n, s.c, s.h, s.w}, Dt::f32, Tag::any}; }

memory wrap(const memory::desc& d, const float* p) { return {d, device().engine, const_cast<float*>(p)}; }

// A memory in the layout a primitive wants: the caller's own memory when the layouts agree,
// otherwise a buffer of this slot that a reorder fills (and, for outputs, empties).
class Slot {
 public:
  // `from` in layout `want`, reordered when they differ.
  memory in(memory from, const memory::desc& want) {
    if (from.get_desc() == want) return from;
    prepare(from.get_desc(), want);
    to_.execute(device().stream, from, buf_);
    return buf_;
  }
  // Where a primitive writes an output of layout `have` that must end in `user`.
  memory out(const memory& user, const memory::desc& have) {
    pending_ = user.get_desc() != have;
    if (!pending_) return user;
    if (!buf_ || buf_.get_desc() != have) buf_ = memory(have, device().engine);
    return buf_;
  }
  // Copies an output written by out() into `user` (nothing when it was written there).
  void finish(memory user) {
    if (!pending_) return;
    if (!back_ || back_src_ != buf_.get_desc() || back_dst_ != user.get_desc()) {
      back_ = dnnl::reorder(buf_, user);
      back_src_ = buf_.get_desc();
      back_dst_ = user.get_desc();
    }
    back_.execute(device().stream, buf_, user);
  }

 private:
  void prepare(const memory::desc& from, const memory::desc& want) {
    if (buf_ && buf_.get_desc() == want && to_src_ == from) return;
    buf_ = memory(want, device().engine);
    to_ = dnnl::reorder(memory(from, device().engine, nullptr), buf_);
    to_src_ = from;
  }

  memory buf_;
  dnnl::reorder to_, back_;
  memory::desc to_src_, back_src_, back_dst_;
  bool pending_ = false;
};

class OneDnnConv2d final : public detail::WeightBiasLayer {
 public:
  OneDnnConv2d(Shape in, int out_c, int k, int pad)
      : WeightBiasLayer(in, detail::conv_out(in, out_c, k, pad), int64_t{in.c} * k * k), k_(k), pad_(pad) {}
  std::string name() const override { return fmt::format("conv{}x{}x{}", out_.c, k_, k_); }
  LayerInfo info() const override { return {LayerInfo::Kind::kConv, in_, out_, k_, pad_}; }

  void forward(const Matrix& x, Matrix& y) override {
    const Plan& p = plan(x.rows());
    y.resize(x.rows(), out_.size());
    const memory dst_user = wrap(nchw(x.rows(), out_), y.data());
    const memory dst = s_dst_.out(dst_user, p.fwd.dst_desc());
    p.fwd_prim.execute(device().stream,
                       {{DNNL_ARG_SRC, s_src_.in(wrap(nchw(x.rows(), in_), x.data()), p.fwd.src_desc())},
                        {DNNL_ARG_WEIGHTS, s_w_.in(wrap(weights_md(), W_.data()), p.fwd.weights_desc())},
                        {DNNL_ARG_BIAS, wrap(bias_md(), b_.data())},
                        {DNNL_ARG_DST, dst}});
    s_dst_.finish(dst_user);
    device().stream.wait();
  }

  void backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx) override {
    const Plan& p = plan(x.rows());
    const memory dy_user = wrap(nchw(x.rows(), out_), dy.data());
    const memory dw_user = wrap(weights_md(), dW_.data());
    const memory dw = s_dw_.out(dw_user, p.bwd_w.diff_weights_desc());
    p.bwd_w_prim.execute(device().stream,
                         {{DNNL_ARG_SRC, s_src_.in(wrap(nchw(x.rows(), in_), x.data()), p.bwd_w.src_desc())},
                          {DNNL_ARG_DIFF_DST, s_dy_.in(dy_user, p.bwd_w.diff_dst_desc())},
                          {DNNL_ARG_DIFF_WEIGHTS, dw},
                          {DNNL_ARG_DIFF_BIAS, wrap(bias_md(), db_.data())}});
    s_dw_.finish(dw_user);
    if (dx) {
      dx->resize(x.rows(), in_.size());
      const memory dx_user = wrap(nchw(x.rows(), in_), dx->data());
      const memory dsrc = s_dx_.out(dx_user, p.bwd_d.diff_src_desc());
      p.bwd_d_prim.execute(device().stream,
                           {{DNNL_ARG_DIFF_DST, s_dy_d_.in(dy_user, p.bwd_d.diff_dst_desc())},
                            {DNNL_ARG_WEIGHTS, s_w_d_.in(wrap(weights_md(), W_.data()), p.bwd_d.weights_desc())},
                            {DNNL_ARG_DIFF_SRC, dsrc}});
      s_dx_.finish(dx_user);
    }
    device().stream.wait();
  }

 private:
  struct Plan {
    int64_t n = -1;
    dnnl::convolution_forward::primitive_desc fwd;
    dnnl::convolution_backward_weights::primitive_desc bwd_w;
    dnnl::convolution_backward_data::primitive_desc bwd_d;
    dnnl::primitive fwd_prim, bwd_w_prim, bwd_d_prim;
  };

  memory::desc weights_md() const { return {{out_.c, in_.c, k_, k_}, Dt::f32, Tag::oihw}; }
  memory::desc bias_md() const { return {{out_.c}, Dt::f32, Tag::x}; }

  // The primitives for batches of n samples, built on first use: oneDNN picks the layouts.
  const Plan& plan(int64_t n) {
    if (plan_.n == n) return plan_;
    const memory::dims stride{1, 1}, pad{pad_, pad_};
    const memory::desc w_any({out_.c, in_.c, k_, k_}, Dt::f32, Tag::any);
    const auto alg = dnnl::algorithm::convolution_direct;
    const Device& d = device();
    Plan p;
    p.n = n;
    p.fwd = {{dnnl::prop_kind::forward_training, alg, any4(n, in_), w_any, bias_md(), any4(n, out_), stride, pad, pad},
             d.engine};
    p.bwd_w = {{alg, any4(n, in_), w_any, bias_md(), any4(n, out_), stride, pad, pad}, d.engine, p.fwd};
    p.bwd_d = {{alg, any4(n, in_), w_any, any4(n, out_), stride, pad, pad}, d.engine, p.fwd};
    p.fwd_prim = dnnl::convolution_forward(p.fwd);
    p.bwd_w_prim = dnnl::convolution_backward_weights(p.bwd_w);
    p.bwd_d_prim = dnnl::convolution_backward_data(p.bwd_d);
    plan_ = std::move(p);
    return plan_;
  }

  int k_, pad_;
  Plan plan_;
  Slot s_src_, s_w_, s_dst_, s_dy_, s_dw_, s_dx_, s_dy_d_, s_w_d_;
};

// Max pooling k x k, stride k, on NCHW: the input's last rows and columns past a multiple of k are
// not read (the output size rounds down); the workspace records where each maximum was.
class OneDnnMaxPool final : public detail::MaxPoolLayer {
 public:
  using MaxPoolLayer::MaxPoolLayer;

  void forward(const Matrix& x, Matrix& y) override {
    plan(x.rows());
    y.resize(x.rows(), out_.size());
    fwd_prim_.execute(device().stream, {{DNNL_ARG_SRC, wrap(nchw(x.rows(), in_), x.data())},
                                        {DNNL_ARG_DST, wrap(nchw(x.rows(), out_), y.data())},
                                        {DNNL_ARG_WORKSPACE, workspace_}});
    device().stream.wait();
  }
  void backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx) override {
    if (!dx) return;
    plan(x.rows());
    dx->resize(x.rows(), in_.size());
    bwd_prim_.execute(device().stream, {{DNNL_ARG_DIFF_DST, wrap(nchw(x.rows(), out_), dy.data())},
                                        {DNNL_ARG_DIFF_SRC, wrap(nchw(x.rows(), in_), dx->data())},
                                        {DNNL_ARG_WORKSPACE, workspace_}});
    device().stream.wait();
  }

 private:
  void plan(int64_t n) {
    if (n_ == n) return;
    const memory::dims stride{k_, k_}, kernel{k_, k_}, pad{0, 0};
    const auto alg = dnnl::algorithm::pooling_max;
    const Device& d = device();
    const dnnl::pooling_forward::primitive_desc fwd(
        {dnnl::prop_kind::forward_training, alg, nchw(n, in_), nchw(n, out_), stride, kernel, pad, pad}, d.engine);
    const dnnl::pooling_backward::primitive_desc bwd({alg, nchw(n, in_), nchw(n, out_), stride, kernel, pad, pad},
                                                     d.engine, fwd);
    fwd_prim_ = dnnl::pooling_forward(fwd);
    bwd_prim_ = dnnl::pooling_backward(bwd);
    workspace_ = memory(fwd.workspace_desc(), d.engine);
    n_ = n;
  }

  int64_t n_ = -1;
  dnnl::primitive fwd_prim_, bwd_prim_;
  memory workspace_;
};

class OneDnnRelu final : public detail::ReluLayer {
 public:
  using ReluLayer::ReluLayer;

  void forward(const Matrix& x, Matrix& y) override {
    plan(x.rows());
    y.resize(x.rows(), in_.size());
    fwd_prim_.execute(device().stream,
                      {{DNNL_ARG_SRC, wrap(md(x.rows()), x.data())}, {DNNL_ARG_DST, wrap(md(x.rows()), y.data())}});
    device().stream.wait();
  }
  void backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx) override {
    if (!dx) return;
    plan(x.rows());
    dx->resize(x.rows(), in_.size());
    bwd_prim_.execute(device().stream, {{DNNL_ARG_SRC, wrap(md(x.rows()), x.data())},
                                        {DNNL_ARG_DIFF_DST, wrap(md(x.rows()), dy.data())},
                                        {DNNL_ARG_DIFF_SRC, wrap(md(x.rows()), dx->data())}});
    device().stream.wait();
  }

 private:
  // Element-wise: the activations as one flat vector.
  memory::desc md(int64_t rows) const { return {{rows * in_.size()}, Dt::f32, Tag::x}; }

  void plan(int64_t n) {
    if (n_ == n) return;
    const auto alg = dnnl::algorithm::eltwise_relu;
    const Device& d = device();
    const memory::desc m = md(n);
    const dnnl::eltwise_forward::primitive_desc fwd({dnnl::prop_kind::forward_training, alg, m, 0.0f, 0.0f}, d.engine);
    const dnnl::eltwise_backward::primitive_desc bwd({alg, m, m, 0.0f, 0.0f}, d.engine, fwd);
    fwd_prim_ = dnnl::eltwise_forward(fwd);
    bwd_prim_ = dnnl::eltwise_backward(bwd);
    n_ = n;
  }

  int64_t n_ = -1;
  dnnl::primitive fwd_prim_, bwd_prim_;
};

// y = x W^T + b, dW = dy^T x, db = column sums of dy, dx = dy W: three BLAS calls.
class BlasLinear final : public detail::WeightBiasLayer {
 public:
  BlasLinear(Shape in, int outputs) : WeightBiasLayer(in, detail::fc_out(outputs), in.size()) {}
  std::string name() const override { return fmt::format("fc{}", out_.c); }
  LayerInfo info() const override { return {LayerInfo::Kind::kLinear, in_, out_, 0, 0}; }
  void forward(const Matrix& x, Matrix& y) override {
    y.resize(x.rows(), out_.c);
    y.rowwise() = b_.row(0);
    gemm(Op::kNone, x, Op::kTranspose, W_, y, 1.0f, 1.0f);
  }
  void backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx) override {
    if (param_grads_) {
      gemm(Op::kTranspose, dy, Op::kNone, x, dW_);
      db_.row(0) = dy.colwise().sum();
    }
    if (dx) gemm(Op::kNone, dy, Op::kNone, W_, *dx);
  }
  void set_param_grads(bool on) override { param_grads_ = on; }

 private:
  bool param_grads_ = true;
};

}  // namespace

std::unique_ptr<Layer> make_onednn_conv2d(Shape in, int out_channels, int kernel, int pad) {
  return std::make_unique<OneDnnConv2d>(in, out_channels, kernel, pad);
}
std::unique_ptr<Layer> make_onednn_relu(Shape in) { return std::make_unique<OneDnnRelu>(in); }
std::unique_ptr<Layer> make_onednn_maxpool(Shape in, int k) { return std::make_unique<OneDnnMaxPool>(in, k); }
std::unique_ptr<Layer> make_blas_linear(Shape in, int outputs) { return std::make_unique<BlasLinear>(in, outputs); }

std::string onednn_info() {
  const dnnl_version_t* v = dnnl_version();
  const char* isa = "unknown";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: isa = "sse41"; break;
    case dnnl::cpu_isa::avx: isa = "avx"; break;
    case dnnl::cpu_isa::avx2: isa = "avx2"; break;
    case dnnl::cpu_isa::avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl::cpu_isa::avx512_core: isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_amx: isa = "avx512_core_amx"; break;
    default: break;
  }
  return fmt::format("oneDNN {}.{}.{} ({})", v->major, v->minor, v->patch, isa);
}

}  // namespace sfb::cnn
