#include "sfb/baselines/dense_update.h"

#include "sfb/core/gemm.h"

namespace sfb::baselines {

void dense_update(const SfBatch& b, Layout layout, Matrix& out) {
  dense_update_rows(b, layout, 0, stored_rows(layout, b.J, b.D), out);
}

void dense_update_rows(const SfBatch& b, Layout layout, int64_t row_begin, int64_t rows, Matrix& block) {
  block.resize(rows, stored_cols(layout, b.J, b.D));
  if (b.count == 0 || rows == 0) {
    block.setZero();
    return;
  }
  if (!b.sparse_v) {
    gemm_uv(layout, b.J, b.D, b.count, 1.0f, b.u.data(), b.v.data(), 0.0f, block.data(), row_begin, rows);
    return;
  }
  const bool row_major = layout == Layout::kRowMajor;
  block.setZero();
  for (int32_t i = 0; i < b.count; ++i) {
    for (int64_t k = b.v_row_ptr[static_cast<size_t>(i)]; k < b.v_row_ptr[static_cast<size_t>(i) + 1]; ++k) {
      const int32_t d = b.v_index[static_cast<size_t>(k)];
      const float v = b.v_value[static_cast<size_t>(k)];
      if (row_major)
        block.col(d) += v * b.u.row(i).segment(row_begin, rows).transpose();
      else if (d >= row_begin && d < row_begin + rows)  // stored row d: contiguous
        block.row(d - row_begin) += v * b.u.row(i);
    }
  }
}

}  // namespace sfb::baselines
