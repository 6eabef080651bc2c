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

}  // namespace sfb::baselines
