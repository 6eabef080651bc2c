#pragma once
// The parameter matrix as a model reads it: W (J x D) = scale * stored, where `stored` is in the
// model's declared layout (Model::layout, sfb/core/tensor.h): J x D for row-major, D x J for
// feature-major (the J values of feature d contiguous).
//
// scale is 1 except in compute_sf() for models whose proximal step is a pure shrinkage
// (Model::prox_scale, L2 regularisation): the runtime then keeps W as scale * W' and each prox
// step costs O(1) instead of O(J * D). W(j, d), W.matrix(), W.row(j) and W.feature(d) apply the
// scale and are correct in both layouts; `stored` alone is not W.
//
// Fast paths read `stored` in its layout and multiply the scale into their result:
//   row-major:     logits = X stored^T          (GEMM; a sparse row x walks rows of stored)
//   feature-major: logits = X stored            (GEMM; a sparse row adds x_d * stored.row(d))
// The generic accessors work in either layout, but a strided view is slow in the other one.
#include "sfb/core/tensor.h"

namespace sfb::api {

struct Weights {
  // Implicit from a row-major J x D matrix: `model.objective(W, data, 0)` on a plain W.
  Weights(const Matrix& s, float sc = 1.0f, Layout l = Layout::kRowMajor) : stored(s), scale(sc), layout(l) {}

  const Matrix& stored;
  float scale = 1.0f;
  Layout layout = Layout::kRowMajor;

  // J x D, the logical shape.
  bool row_major() const { return layout == Layout::kRowMajor; }
  Eigen::Index rows() const { return row_major() ? stored.rows() : stored.cols(); }
  Eigen::Index cols() const { return row_major() ? stored.cols() : stored.rows(); }
  float operator()(Eigen::Index j, Eigen::Index d) const { return scale * (row_major() ? stored(j, d) : stored(d, j)); }

  // W itself, J x D with the scale applied, as an Eigen expression over a strided view of `stored`
  // (evaluated lazily, no copy unless assigned): `Matrix logits = x * W.matrix().transpose();`.
  using View = Eigen::Map<const Matrix, Eigen::Unaligned, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;
  View unscaled() const {
    using S = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
    return row_major() ? View(stored.data(), rows(), cols(), S(stored.cols(), 1))
                       : View(stored.data(), rows(), cols(), S(1, stored.cols()));
  }
  auto matrix() const { return scale * unscaled(); }
  // Row j of W (the weights of output j over all features): contiguous in row-major.
  auto row(Eigen::Index j) const { return scale * unscaled().row(j); }
  // Column d of W (feature d's weights for every output), as a column: contiguous in feature-major.
  auto feature(Eigen::Index d) const { return scale * unscaled().col(d); }
  // A J x D row-major copy with the scale applied (for slow paths such as tests).
  Matrix plain() const { return matrix(); }
};

}  // namespace sfb::api
