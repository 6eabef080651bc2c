#include "sfb/io/dataset.h"

#include <vector>

#include "sfb/core/error.h"

namespace sfb::io {

void Dataset::add_bias() {
  if (!sparse) {
    Matrix out(n, dim + 1);
    out.leftCols(dim) = dense;
    out.col(dim).setOnes();
    dense = std::move(out);
  } else {
    std::vector<Eigen::Triplet<float, int32_t>> trip;
    trip.reserve(static_cast<size_t>(csr.nonZeros() + n));
    for (int64_t r = 0; r < n; ++r) {
      for (SparseRows::InnerIterator it(csr, r); it; ++it)
        trip.emplace_back(static_cast<int32_t>(r), it.col(), it.value());
      trip.emplace_back(static_cast<int32_t>(r), static_cast<int32_t>(dim), 1.0f);
    }
    SparseRows out(n, dim + 1);
    out.setFromTriplets(trip.begin(), trip.end());
    csr = std::move(out);
  }
  ++dim;
}

Dataset Dataset::row_range(int64_t begin, int64_t end, const std::string& part) const {
  SFB_CHECK(0 <= begin && begin <= end && end <= n, "rows [{}, {}) of {} rows of {}", begin, end, n, name);
  Dataset d;
  d.name = part;
  d.n = end - begin;
  d.dim = dim;
  d.classes = classes;
  d.sparse = sparse;
  if (sparse)
    d.csr = csr.middleRows(begin, end - begin);
  else
    d.dense = dense.middleRows(begin, end - begin);
  d.labels.assign(labels.begin() + begin, labels.begin() + end);
  return d;
}

void Dataset::validate() const {
  SFB_CHECK_DATA(static_cast<int64_t>(labels.size()) == n, "{}: {} labels for {} samples", name, labels.size(), n);
  if (sparse) {
    SFB_CHECK_DATA(csr.rows() == n && csr.cols() == dim, "{}: sparse matrix is {}x{}, expected {}x{}", name, csr.rows(),
                   csr.cols(), n, dim);
  } else {
    SFB_CHECK_DATA(dense.rows() == n && dense.cols() == dim, "{}: matrix is {}x{}, expected {}x{}", name, dense.rows(),
                   dense.cols(), n, dim);
  }
  for (int64_t i = 0; i < n; ++i) {
    SFB_CHECK_DATA(labels[i] >= 0 && labels[i] < classes, "{}: sample {} has label {}, outside [0, {})", name, i,
                   labels[i], classes);
  }
}

Range partition_range(int64_t n, int rank, int size) {
  SFB_ENFORCE(size > 0 && rank >= 0 && rank < size, "rank {} of {}", rank, size);
  return {n * rank / size, n * (rank + 1) / size};
}

}  // namespace sfb::io
