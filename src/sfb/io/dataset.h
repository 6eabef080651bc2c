#pragma once
// An in-memory labelled data set: dense rows (row-major N x D) or sparse CSR rows, int labels in
// [0, classes). D includes the bias feature when the config asks for one.
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/SparseCore>

#include "sfb/core/tensor.h"

namespace sfb::io {

using SparseRows = Eigen::SparseMatrix<float, Eigen::RowMajor, int32_t>;

struct Dataset {
  std::string name;  // file or generator, for messages
  int64_t n = 0;
  int64_t dim = 0;
  int64_t classes = 0;
  bool sparse = false;
  Matrix dense;    // n x dim when !sparse
  SparseRows csr;  // n x dim when sparse
  std::vector<int32_t> labels;

  // Appends a constant-1 column (the bias feature).
  void add_bias();
  // Checks shapes and label range; throws DataError naming `name`.
  void validate() const;
  // A copy of rows [begin, end), named `name`.
  Dataset row_range(int64_t begin, int64_t end, const std::string& name) const;
};

// Rows [begin, end) of N rows for `rank` of `size`: contiguous, sizes differ by at most one.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
Range partition_range(int64_t n, int rank, int size);

}  // namespace sfb::io
