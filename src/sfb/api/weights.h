#pragma once
// The parameter matrix as a model reads it in compute_sf(): W = scale * stored. scale is 1 except
// for models whose proximal step is a pure shrinkage (Model::prox_scale, L2 regularisation): the
// runtime then keeps W as scale * W' and each prox step costs O(1) instead of O(J * D). Read W
// through W(j, d), W.row(j) or W.matrix(), which apply the scale; `stored` alone is not W.
#include "sfb/core/tensor.h"

namespace sfb::api {

struct Weights {
  const Matrix& stored;
  float scale = 1.0f;

  Eigen::Index rows() const { return stored.rows(); }
  Eigen::Index cols() const { return stored.cols(); }
  float operator()(Eigen::Index j, Eigen::Index d) const { return scale * stored(j, d); }
  // W itself, scale applied, as an Eigen expression: `Matrix logits = x * W.matrix().transpose();`
  // (evaluated lazily, no copy unless assigned). Reading `stored` directly is for models that fold
  // the scale in themselves (e.g. multiply it into the result of a GEMM on `stored`).
  auto matrix() const { return scale * stored; }
  auto row(Eigen::Index j) const { return scale * stored.row(j); }
};

}  // namespace sfb::api
