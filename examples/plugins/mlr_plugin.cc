// An out-of-tree sfb model: multiclass logistic regression with label smoothing, written against
// the installed plugin API only (docs/plugins.md walks through it).
//
// For sample (x, y) and p = softmax(W x), the loss is the cross-entropy against the smoothed target
// t = (1 - eps) e_y + eps / J, whose gradient in W is (p - t) x^T: the sufficient factors are
// u = p - t and v = x. With eps = 0 this is sfb's built-in "mlr".
#include <algorithm>
#include <cmath>

#include <sfb/api/plugin.h>

namespace {

class SmoothedMlr : public sfb::api::Model {
 public:
  // Reads its parameter shape from the data and its own key from [model.params].
  explicit SmoothedMlr(const sfb::api::ModelContext& ctx)
      : J_(ctx.train().classes),
        D_(ctx.train().dim),
        sparse_(ctx.train().sparse),
        eps_(ctx.param_double("label_smoothing", 0.0)) {}

  std::string name() const override { return "smoothed_mlr"; }
  int64_t rows() const override { return J_; }
  int64_t cols() const override { return D_; }
  bool reads_sparse_rows() const override { return true; }  // compute_sf and objective handle batch.sparse
  bool sparse_v() const override { return sparse_; }

  void compute_sf(const sfb::api::Weights& W, const sfb::api::MiniBatch& batch, sfb::api::SfWriter& out) override {
    // Logits for the whole minibatch at once (K x J), then u = p - t row by row.
    sfb::Matrix p;
    if (batch.sparse)
      p.noalias() = batch.x_csr * W.stored.transpose();
    else
      p.noalias() = batch.x * W.stored.transpose();
    p *= W.scale;
    softmax_rows(p);
    const float off = static_cast<float>(eps_ / static_cast<double>(J_));
    for (int64_t i = 0; i < batch.size(); ++i) {
      p.row(i).array() -= off;
      p(i, batch.labels[static_cast<size_t>(i)]) -= static_cast<float>(1.0 - eps_);
    }
    out.write_u_block(p);
    if (!batch.sparse) {
      out.write_v_block(batch.x);
    } else {
      const auto* outer = batch.x_csr.outerIndexPtr();
      for (int64_t i = 0; i < batch.size(); ++i) {
        const auto b = outer[i], e = outer[i + 1];
        out.write_v(static_cast<int32_t>(i), std::span(batch.x_csr.innerIndexPtr() + b, static_cast<size_t>(e - b)),
                    std::span(batch.x_csr.valuePtr() + b, static_cast<size_t>(e - b)));
      }
    }
    out.commit();
  }

  double objective(const sfb::Matrix& W, const sfb::io::Dataset& data, int64_t limit) const override {
    const int64_t n = (limit <= 0 || limit > data.n) ? data.n : limit;
    if (n == 0) return 0.0;
    const sfb::Matrix p = probabilities(W, data, n);
    double loss = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < J_; ++j) {
        const double t = eps_ / static_cast<double>(J_) + (j == data.labels[static_cast<size_t>(i)] ? 1.0 - eps_ : 0.0);
        if (t > 0) loss -= t * std::log(std::max(static_cast<double>(p(i, j)), 1e-30));
      }
    }
    return loss / static_cast<double>(n);
  }

  double accuracy(const sfb::Matrix& W, const sfb::io::Dataset& data) const override {
    if (data.n == 0) return -1.0;
    const sfb::Matrix p = probabilities(W, data, data.n);
    int64_t right = 0;
    for (int64_t i = 0; i < data.n; ++i) {
      Eigen::Index arg = 0;
      p.row(i).maxCoeff(&arg);
      right += arg == data.labels[static_cast<size_t>(i)] ? 1 : 0;
    }
    return static_cast<double>(right) / static_cast<double>(data.n);
  }

 private:
  static void softmax_rows(sfb::Matrix& z) {
    for (Eigen::Index i = 0; i < z.rows(); ++i) {
      auto row = z.row(i);
      row = (row.array() - row.maxCoeff()).exp();
      row /= row.sum();
    }
  }
  sfb::Matrix probabilities(const sfb::Matrix& W, const sfb::io::Dataset& data, int64_t n) const {
    sfb::Matrix z;
    if (data.sparse)
      z.noalias() = data.csr.topRows(n) * W.transpose();
    else
      z.noalias() = data.dense.topRows(n) * W.transpose();
    softmax_rows(z);
    return z;
  }

  int64_t J_, D_;
  bool sparse_;
  double eps_;
};

}  // namespace

SFB_DEFINE_PLUGIN(SmoothedMlr)
