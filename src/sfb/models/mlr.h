#pragma once
// Multiclass logistic regression (softmax cross-entropy), W is J classes x D features, kept
// feature-major on sparse data and row-major on dense data (model.layout overrides it; every
// function here reads either layout).
// For sample (x, y): p = softmax(W x), the gradient is (p - e_y) x^T, so the SF pair is
// u = p - e_y (length J) and v = x (length D). The minibatch is handled in matrix form:
// logits = X W^T (K x J), a row-wise softmax, U = P - Y.
#include "sfb/models/shaped_model.h"

namespace sfb::models {

// MLR's row-sharded side (api/row_sharded.h): a block of classes. Statistics per sample: the
// log-sum-exp of its logits (softmax's normaliser), its target's logit (0 outside the target's
// block) and the arg max (accuracy); u on the block is p - e_y. `lambda` > 0 adds (lambda/2) ||W||^2
// to the objective (L2-MLR; its shrinkage is the model's prox_scale, applied by the runtime).
class MlrRows final : public api::RowSharded {
 public:
  explicit MlrRows(double lambda = 0) : lambda_(lambda) {}
  std::vector<api::Reduce> statistics() const override;
  api::MiniBatch shard_samples(const api::MiniBatch& batch) override { return batch; }
  api::MiniBatch eval_samples(const io::Dataset& data, int64_t limit, api::EvalSet set) const override;
  void partial_statistics(const api::Weights& block, int64_t row0, const api::MiniBatch& samples, Matrix& outputs,
                          float* stats) const override;
  void block_factors(int64_t row0, const api::MiniBatch& samples, const float* stats, Matrix& outputs) const override;
  double sample_loss(const float* stats, int32_t label) const override;
  int sample_correct(const float* stats, int32_t label) const override;
  double block_regulariser(const api::Weights& block) const override;

 private:
  double lambda_;
};

class Mlr : public ShapedModel {
 public:
  explicit Mlr(const api::ModelContext& ctx)
      : Mlr(ctx.train().classes, ctx.train().dim, ctx.train().sparse, model_layout(ctx, "mlr", true)) {}
  Mlr(int64_t classes, int64_t dim, bool sparse, Layout layout = Layout::kRowMajor)
      : ShapedModel("mlr", classes, dim, sparse, layout) {}
  void compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) override;
  double objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const override;
  double accuracy(const api::Weights& W, const io::Dataset& data) const override;
  api::RowSharded* row_sharded() override { return &rows_; }

  // W.scale * X W^T for the minibatch's rows (K x J, J = W.rows(): a block of rows works too).
  static void logits(const api::Weights& W, const api::MiniBatch& batch, Matrix& out);
  // Row-wise softmax probabilities of W.scale * X W^T for rows [begin, end) of data (K x J).
  static Matrix probabilities(const api::Weights& W, const io::Dataset& data, int64_t begin, int64_t end);
  // Softmax probabilities of the minibatch (K x J).
  static Matrix probabilities(const api::Weights& W, const api::MiniBatch& batch);
  // Mean cross-entropy over the first `limit` rows (all when <= 0).
  static double cross_entropy(const api::Weights& W, const io::Dataset& data, int64_t limit);
  // Writes v_i = x_i for every sample of the batch (dense block or sparse rows).
  static void write_x_as_v(const api::MiniBatch& batch, api::SfWriter& out);

 private:
  MlrRows rows_;
};

}  // namespace sfb::models
