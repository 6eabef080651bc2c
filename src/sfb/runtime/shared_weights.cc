#include "sfb/runtime/shared_weights.h"

#include <cmath>

#include "sfb/core/error.h"

namespace sfb::runtime {

SharedWeights::SharedWeights(int64_t J, int64_t D, Layout layout)
    : J_(J), D_(D), layout_(layout), stored_(Matrix::Zero(stored_rows(layout, J, D), stored_cols(layout, J, D))) {}

void SharedWeights::Writer::assign_row_major(const Matrix& W) {
  SFB_ENFORCE(W.rows() == w_.J_ && W.cols() == w_.D_, "W is {} x {}, the replica {} x {}", W.rows(), W.cols(), w_.J_,
              w_.D_);
  if (w_.layout_ == Layout::kRowMajor)
    w_.stored_ = W;
  else
    w_.stored_ = W.transpose();
  w_.scale_ = 1.0f;
}

void SharedWeights::fold_scale() {
  if (scale_ == 1.0f) return;
  stored_ *= scale_;
  scale_ = 1.0f;
}

RowSink SharedWeights::Writer::assign_rows() {
  w_.scale_ = 1.0f;
  return row_sink(w_.stored_, w_.layout_);
}

void SharedWeights::copy_materialized(Matrix& out) const {
  out.resize(stored_.rows(), stored_.cols());
  if (scale_ == 1.0f)
    out = stored_;
  else
    out = scale_ * stored_;
}

bool SharedWeights::all_finite_unlocked() const { return std::isfinite(scale_) && stored_.allFinite(); }

Matrix SharedWeights::row_major_copy() const {
  Matrix W(J_, D_);
  for_each_row_block(file_order_unlocked(), row_sink(W, Layout::kRowMajor));
  return W;
}

}  // namespace sfb::runtime
