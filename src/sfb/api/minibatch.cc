#include "sfb/api/minibatch.h"

#include "sfb/core/error.h"

namespace sfb::api {

void gather(const io::Dataset& data, const std::vector<int64_t>& rows, MiniBatch& out) {
  const auto k = static_cast<int64_t>(rows.size());
  out.sparse = data.sparse;
  out.rows = rows;
  out.labels.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    SFB_ENFORCE(rows[i] >= 0 && rows[i] < data.n, "row {} of {}", rows[i], data.n);
    out.labels[static_cast<size_t>(i)] = data.labels[static_cast<size_t>(rows[i])];
  }
  if (!data.sparse) {
    out.x.resize(k, data.dim);
    for (int64_t i = 0; i < k; ++i) out.x.row(i) = data.dense.row(rows[i]);
    return;
  }
  int64_t nnz = 0;
  for (int64_t r : rows) nnz += data.csr.outerIndexPtr()[r + 1] - data.csr.outerIndexPtr()[r];
  out.x_csr.resize(k, data.dim);
  out.x_csr.resizeNonZeros(nnz);
  int32_t* outer = out.x_csr.outerIndexPtr();
  int64_t pos = 0;
  for (int64_t i = 0; i < k; ++i) {
    outer[i] = static_cast<int32_t>(pos);
    const int32_t b = data.csr.outerIndexPtr()[rows[i]];
    const int32_t e = data.csr.outerIndexPtr()[rows[i] + 1];
    std::copy(data.csr.innerIndexPtr() + b, data.csr.innerIndexPtr() + e, out.x_csr.innerIndexPtr() + pos);
    std::copy(data.csr.valuePtr() + b, data.csr.valuePtr() + e, out.x_csr.valuePtr() + pos);
    pos += e - b;
  }
  outer[k] = static_cast<int32_t>(pos);
}

}  // namespace sfb::api
