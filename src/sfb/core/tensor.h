#pragma once
// Dense and sparse tensor types shared by every layer, and the two memory layouts of W.
#include <cstdint>
#include <string_view>
#include <vector>

#include <Eigen/Core>

namespace sfb {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;
using MatrixMap = Eigen::Map<Matrix>;
using ConstMatrixMap = Eigen::Map<const Matrix>;

// A view of m that cannot be resized (what the runtime hands a model to write into).
inline MatrixMap view(Matrix& m) { return MatrixMap(m.data(), m.rows(), m.cols()); }

// How the runtime keeps a model's parameter matrix W (J x D, logically): the model declares it
// (api::Model::layout) and every path that touches W (update, SF computation, proximal steps,
// baselines, drift, reconciliation) works on the stored matrix in that layout.
//  * kRowMajor: stored J x D, row j contiguous (dense models: the update is one GEMM either way).
//  * kFeatureMajor: stored D x J (= W^T row-major), the J values of feature d contiguous, as
//    parameter servers and embedding tables key on the feature: a non-zero v_d of a sparse v is then
//    one contiguous axpy of length J, and a sparse row's logits W x read whole stored rows.
// Files (checkpoints, model files) always hold W as J x D row-major: a model trained in either
// layout reads and evaluates the same (docs/formats.md).
enum class Layout : uint8_t { kRowMajor = 0, kFeatureMajor = 1 };

inline constexpr std::string_view layout_name(Layout l) {
  return l == Layout::kRowMajor ? "row-major" : "feature-major";
}
// The stored matrix's shape for a J x D parameter matrix.
inline constexpr int64_t stored_rows(Layout l, int64_t J, int64_t D) { return l == Layout::kRowMajor ? J : D; }
inline constexpr int64_t stored_cols(Layout l, int64_t J, int64_t D) { return l == Layout::kRowMajor ? D : J; }
// W (J x D, row-major: the file order) from the stored matrix, and the stored matrix from W.
inline Matrix to_row_major(const Matrix& stored, Layout l) {
  return l == Layout::kRowMajor ? stored : Matrix(stored.transpose());
}
inline Matrix from_row_major(const Matrix& W, Layout l) { return l == Layout::kRowMajor ? W : Matrix(W.transpose()); }

// A sparse vector as parallel (index, value) arrays, indices strictly increasing.
struct SparseVec {
  std::vector<int32_t> index;
  std::vector<float> value;
  int64_t nnz() const { return static_cast<int64_t>(index.size()); }
};

}  // namespace sfb
