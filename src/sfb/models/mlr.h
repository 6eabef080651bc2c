#pragma once
// Multiclass logistic regression (softmax cross-entropy), W is J classes x D features.
// For sample (x, y): p = softmax(W x), the gradient is (p - e_y) x^T, so the SF pair is
// u = p - e_y (length J) and v = x (length D). The minibatch is handled in matrix form:
// logits = X W^T (K x J), a row-wise softmax, U = P - Y.
#include "sfb/api/model.h"

namespace sfb::models {

class Mlr : public api::Model {
 public:
  std::string name() const override { return "mlr"; }
  int64_t rows(const io::Dataset& train) const override { return train.classes; }
  int64_t cols(const io::Dataset& train) const override { return train.dim; }
  void compute_sf(const Matrix& W, const api::MiniBatch& batch, api::SfWriter& out) override;
  double objective(const Matrix& W, const io::Dataset& data, int64_t limit) const override;
  double accuracy(const Matrix& W, const io::Dataset& data) const override;

  // Row-wise softmax probabilities of X W^T for rows [begin, end) of data (K x J).
  static Matrix probabilities(const Matrix& W, const io::Dataset& data, int64_t begin, int64_t end);
};

}  // namespace sfb::models
