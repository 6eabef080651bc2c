#pragma once
// Dense and sparse tensor types shared by every layer. W is always a row-major float matrix.
#include <cstdint>
#include <vector>

#include <Eigen/Core>

namespace sfb {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;
using MatrixMap = Eigen::Map<Matrix>;
using ConstMatrixMap = Eigen::Map<const Matrix>;

// A view of m that cannot be resized (what the runtime hands a model to write into).
inline MatrixMap view(Matrix& m) { return MatrixMap(m.data(), m.rows(), m.cols()); }

// A sparse vector as parallel (index, value) arrays, indices strictly increasing.
struct SparseVec {
  std::vector<int32_t> index;
  std::vector<float> value;
  int64_t nnz() const { return static_cast<int64_t>(index.size()); }
};

}  // namespace sfb
