#pragma once
// The parameter matrix as a model reads it in compute_sf(): W = scale * stored. scale is 1 except
// for models whose proximal step is a pure shrinkage (Model::prox_scale, L2 regularisation): the
// runtime then keeps W as scale * W' and each prox step costs O(1) instead of O(J * D).
#include "sfb/core/tensor.h"

namespace sfb::api {

struct Weights {
  const Matrix& stored;
  float scale = 1.0f;

  Eigen::Index rows() const { return stored.rows(); }
  Eigen::Index cols() const { return stored.cols(); }
  float operator()(Eigen::Index j, Eigen::Index d) const { return scale * stored(j, d); }
};

}  // namespace sfb::api
