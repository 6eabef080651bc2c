#include "sfb/runtime/shared_weights.h"

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

Matrix SharedWeights::materialized() const { return scale_ == 1.0f ? stored_ : Matrix(scale_ * stored_); }

Matrix SharedWeights::row_major() const {
  if (layout_ == Layout::kRowMajor) return materialized();
  if (scale_ == 1.0f) return stored_.transpose();
  return (scale_ * stored_).transpose();
}

Matrix SharedWeights::take_row_major() {
  fold_scale();
  if (layout_ == Layout::kRowMajor) return std::move(stored_);
  return stored_.transpose();
}

}  // namespace sfb::runtime
