#include "sfb/baselines/dense_update.h"

#include "sfb/core/gemm.h"

namespace sfb::baselines {

void dense_update(const SfBatch& b, Matrix& out) {
  out.resize(b.J, b.D);
  if (b.count == 0) {
    out.setZero();
    return;
  }
  if (!b.sparse_v) {
    gemm(Op::kTranspose, b.u, Op::kNone, b.v, out);
    return;
  }
  out.setZero();
  for (int32_t i = 0; i < b.count; ++i) {
    for (int64_t k = b.v_row_ptr[static_cast<size_t>(i)]; k < b.v_row_ptr[static_cast<size_t>(i) + 1]; ++k)
      out.col(b.v_index[static_cast<size_t>(k)]) += b.v_value[static_cast<size_t>(k)] * b.u.row(i).transpose();
  }
}

void dense_update_rows(const SfBatch& b, int64_t row_begin, int64_t rows, Matrix& out) {
  auto block = out.middleRows(row_begin, rows);
  if (b.count == 0 || rows == 0) {
    block.setZero();
    return;
  }
  if (!b.sparse_v) {
    // op(A) = U[:, rows]^T (rows x K, read from U's columns), B = V (K x D).
    gemm(Op::kTranspose, Op::kNone, rows, b.D, b.count, 1.0f, b.u.data() + row_begin, b.J, b.v.data(), b.D, 0.0f,
         out.data() + row_begin * b.D, b.D);
    return;
  }
  block.setZero();
  for (int32_t i = 0; i < b.count; ++i) {
    const auto u = b.u.row(i).segment(row_begin, rows).transpose();
    for (int64_t k = b.v_row_ptr[static_cast<size_t>(i)]; k < b.v_row_ptr[static_cast<size_t>(i) + 1]; ++k)
      block.col(b.v_index[static_cast<size_t>(k)]) += b.v_value[static_cast<size_t>(k)] * u;
  }
}

}  // namespace sfb::baselines
