#pragma once
// Multiclass logistic regression (softmax cross-entropy), W is J classes x D features, kept
// feature-major on sparse data and row-major on dense data (model.layout overrides it; every
// function here reads either layout).
// For sample (x, y): p = softmax(W x), the gradient is (p - e_y) x^T, so the SF pair is
// u = p - e_y (length J) and v = x (length D). The minibatch is handled in matrix form:
// logits = X W^T (K x J), a row-wise softmax, U = P - Y.
#include "sfb/models/shaped_model.h"

namespace sfb::models {

class Mlr : public ShapedModel {
 public:
  explicit Mlr(const api::ModelContext& ctx)
      : Mlr(ctx.train().classes, ctx.train().dim, ctx.train().sparse, model_layout(ctx, "mlr", true)) {}
  Mlr(int64_t classes, int64_t dim, bool sparse, Layout layout = Layout::kRowMajor)
      : ShapedModel("mlr", classes, dim, sparse, layout) {}
  void compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) override;
  double objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const override;
  double accuracy(const api::Weights& W, const io::Dataset& data) const override;

  // Row-wise softmax probabilities of W.scale * X W^T for rows [begin, end) of data (K x J).
  static Matrix probabilities(const api::Weights& W, const io::Dataset& data, int64_t begin, int64_t end);
  // Softmax probabilities of the minibatch (K x J).
  static Matrix probabilities(const api::Weights& W, const api::MiniBatch& batch);
  // Mean cross-entropy over the first `limit` rows (all when <= 0).
  static double cross_entropy(const api::Weights& W, const io::Dataset& data, int64_t limit);
  // Writes v_i = x_i for every sample of the batch (dense block or sparse rows).
  static void write_x_as_v(const api::MiniBatch& batch, api::SfWriter& out);
};

}  // namespace sfb::models
