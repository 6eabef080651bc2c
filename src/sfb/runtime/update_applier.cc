#include "sfb/runtime/update_applier.h"

#include "sfb/core/error.h"

namespace sfb::runtime {

void apply_batch(Matrix& W, const SfBatch& b, int threads) {
  SFB_ENFORCE(W.rows() == b.J && W.cols() == b.D, "W is {}x{}, batch {}x{}", W.rows(), W.cols(), b.J, b.D);
  if (b.count == 0) return;
  if (!b.sparse_v) {
    W.noalias() += b.u.transpose() * b.v;
    return;
  }
  const int64_t J = b.J;
  const int32_t K = b.count;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t j = 0; j < J; ++j) {
    float* row = W.row(j).data();
    for (int32_t i = 0; i < K; ++i) {
      const float a = b.u(i, j);
      if (a == 0.0f) continue;
      for (int64_t k = b.v_row_ptr[static_cast<size_t>(i)]; k < b.v_row_ptr[static_cast<size_t>(i) + 1]; ++k)
        row[b.v_index[static_cast<size_t>(k)]] += a * b.v_value[static_cast<size_t>(k)];
    }
  }
}

}  // namespace sfb::runtime
