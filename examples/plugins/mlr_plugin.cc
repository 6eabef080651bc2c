// An out-of-tree sfb model: multiclass logistic regression with label smoothing, written against
// the installed plugin API only (docs/plugins.md walks through it).
//
// For sample (x, y) and p = softmax(W x), the loss is the cross-entropy against the smoothed target
// t = (1 - eps) e_y + eps / J, whose gradient in W is (p - t) x^T: the sufficient factors are
// u = p - t and v = x. With eps = 0 this is sfb's built-in "mlr".
//
// Layout (docs/plugins.md, "Row-major or feature-major"): the plugin keeps W feature-major (stored
// D x J: each feature's J weights contiguous) on sparse data, where every non-zero v_d then updates
// one contiguous stored row and a sparse row's logits add whole stored rows, and row-major (J x D)
// on dense data, where the update is one GEMM either way. [model.params] layout = "row-major" or
// "feature-major" overrides it. Every product below reads W.stored in W.layout.
//
// Row-sharded (docs/plugins.md, "Sharded by rows"): comm.scheme = "sharded" gives each rank a block of
// classes. Per sample the blocks' statistics are the log-sum-exp of the logits, the target's logit,
// the sum of the logits (the smoothing's term) and the arg max; u on the block is p - t.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <sfb/api/plugin.h>

namespace {

class SmoothedMlr : public sfb::api::Model, public sfb::api::RowSharded {
 public:
  // Reads its parameter shape from the data and its own key from [model.params].
  explicit SmoothedMlr(const sfb::api::ModelContext& ctx)
      : J_(ctx.train().classes),
        D_(ctx.train().dim),
        sparse_(ctx.train().sparse),
        eps_(ctx.param_double("label_smoothing", 0.0)) {
    // "auto" (what an unset key reads as): feature-major on sparse data.
    const std::string layout = ctx.param_string("layout", "auto");
    if (layout != "auto" && layout != "row-major" && layout != "feature-major")
      throw sfb::api::ConfigError("model.params.layout must be \"auto\", \"row-major\" or \"feature-major\", got \"" +
                                  layout + "\"");
    const bool feature_major = layout == "feature-major" || (layout == "auto" && sparse_);
    layout_ = feature_major ? sfb::Layout::kFeatureMajor : sfb::Layout::kRowMajor;
  }

  std::string name() const override { return "smoothed_mlr"; }
  int64_t rows() const override { return J_; }
  int64_t cols() const override { return D_; }
  bool reads_sparse_rows() const override { return true; }  // compute_sf and objective handle batch.sparse
  bool sparse_v() const override { return sparse_; }
  sfb::Layout layout() const override { return layout_; }

  void compute_sf(const sfb::api::Weights& W, const sfb::api::MiniBatch& batch, sfb::api::SfWriter& out) override {
    // Logits for the whole minibatch at once (K x J), then u = p - t row by row.
    sfb::Matrix p = batch.sparse ? logits(batch.x_csr, W) : logits(batch.x, W);
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

  double objective(const sfb::api::Weights& W, const sfb::io::Dataset& data, int64_t limit) const override {
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

  double accuracy(const sfb::api::Weights& W, const sfb::io::Dataset& data) const override {
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

  // ---- The row-sharded side: rows [row0, row0 + block.rows()) are classes row0.. ----
  sfb::api::RowSharded* row_sharded() override { return this; }
  // Slots: 0-1 log-sum-exp, 2 the target's logit, 3 the sum of the logits, 4-5 the arg max.
  std::vector<sfb::api::Reduce> statistics() const override {
    using R = sfb::api::Reduce;
    return {R::kLogSumExp, R::kSum, R::kSum, R::kMaxIndex};
  }
  sfb::api::MiniBatch shard_samples(const sfb::api::MiniBatch& batch) override { return batch; }
  sfb::api::MiniBatch eval_samples(const sfb::io::Dataset& data, int64_t limit, sfb::api::EvalSet) const override {
    const int64_t n = (limit <= 0 || limit > data.n) ? data.n : limit;
    sfb::api::MiniBatch b;  // the first n rows as they are (dense, or CSR)
    b.sparse = data.sparse;
    if (data.sparse)
      b.x_csr = data.csr.topRows(n);
    else
      b.x = data.dense.topRows(n);
    b.labels.assign(data.labels.begin(), data.labels.begin() + n);
    return b;
  }
  void partial_statistics(const sfb::api::Weights& block, int64_t row0, const sfb::api::MiniBatch& s, sfb::Matrix& z,
                          float* stats) const override {
    z = s.sparse ? logits(s.x_csr, block) : logits(s.x, block);
    z *= block.scale;
    for (int64_t i = 0; i < s.size(); ++i) {
      float* st = stats + i * 6;
      const int64_t y = s.labels[static_cast<size_t>(i)] - row0;
      Eigen::Index arg = 0;
      const float m = z.cols() > 0 ? z.row(i).maxCoeff(&arg) : -std::numeric_limits<float>::infinity();
      st[0] = m;
      st[1] = z.cols() > 0 ? (z.row(i).array() - m).exp().sum() : 0.0f;
      st[2] = y >= 0 && y < z.cols() ? z(i, y) : 0.0f;
      st[3] = z.row(i).sum();
      st[4] = m;
      st[5] = sfb::api::max_index_slot(static_cast<int32_t>(row0 + arg));
    }
  }
  void block_factors(int64_t row0, const sfb::api::MiniBatch& s, const float* stats, sfb::Matrix& z) const override {
    const auto off = static_cast<float>(eps_ / static_cast<double>(J_));
    for (int64_t i = 0; i < s.size(); ++i) {
      const float lse = stats[i * 6] + std::log(stats[i * 6 + 1]);
      z.row(i) = (z.row(i).array() - lse).exp() - off;
      const int64_t y = s.labels[static_cast<size_t>(i)] - row0;
      if (y >= 0 && y < z.cols()) z(i, y) -= static_cast<float>(1.0 - eps_);
    }
  }
  // -sum_j t_j log p_j = lse - (1 - eps) z_y - (eps / J) sum_j z_j.
  double sample_loss(const float* st, int32_t) const override {
    const double lse = static_cast<double>(st[0]) + std::log(static_cast<double>(st[1]));
    return lse - (1.0 - eps_) * st[2] - eps_ / static_cast<double>(J_) * st[3];
  }
  int sample_correct(const float* st, int32_t label) const override {
    return sfb::api::max_index_of(st[5]) == label ? 1 : 0;
  }

 private:
  static void softmax_rows(sfb::Matrix& z) {
    for (Eigen::Index i = 0; i < z.rows(); ++i) {
      auto row = z.row(i);
      row = (row.array() - row.maxCoeff()).exp();
      row /= row.sum();
    }
  }
  // X W^T (K x J, unscaled) for dense or sparse rows X: row-major stored is J x D, feature-major D x J.
  template <typename Rows>
  static sfb::Matrix logits(const Rows& x, const sfb::api::Weights& W) {
    sfb::Matrix z;
    if (W.row_major())
      z.noalias() = x * W.stored.transpose();
    else
      z.noalias() = x * W.stored;  // sparse x: each non-zero adds one contiguous stored row
    return z;
  }
  sfb::Matrix probabilities(const sfb::api::Weights& W, const sfb::io::Dataset& data, int64_t n) const {
    sfb::Matrix z = data.sparse ? logits(data.csr.topRows(n), W) : logits(data.dense.topRows(n), W);
    z *= W.scale;
    softmax_rows(z);
    return z;
  }

  int64_t J_, D_;
  bool sparse_;
  double eps_;
  sfb::Layout layout_ = sfb::Layout::kRowMajor;
};

}  // namespace

SFB_DEFINE_PLUGIN(SmoothedMlr)
