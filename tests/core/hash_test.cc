#include "sfb/core/hash.h"

#include <cstring>

#include <gtest/gtest.h>

namespace sfb {
namespace {

TEST(Hash, Crc32KnownValue) {
  const char* s = "123456789";
  EXPECT_EQ(crc32(std::as_bytes(std::span(s, 9))), 0xCBF43926u);
}

TEST(Hash, Fnv1aKnownValue) { EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL); }

TEST(Hash, MatrixChecksumSeesOneBitAndShape) {
  Matrix a = Matrix::Random(3, 4);
  Matrix b = a;
  EXPECT_EQ(matrix_checksum(a), matrix_checksum(b));
  uint32_t bits;
  std::memcpy(&bits, &b(1, 2), 4);
  bits ^= 1;
  std::memcpy(&b(1, 2), &bits, 4);
  EXPECT_NE(matrix_checksum(a), matrix_checksum(b));
  Matrix c = Eigen::Map<Matrix>(a.data(), 4, 3);
  EXPECT_NE(matrix_checksum(a), matrix_checksum(c));
}

// The streamed fingerprint (a replica in file order, block by block) is the in-memory one: for a
// row-major matrix, for its transpose kept feature-major, and across blocks of one row each.
TEST(Hash, StreamedMatrixChecksumEqualsTheInMemoryOne) {
  const Matrix W = Matrix::Random(37, 5);
  const Matrix stored = W.transpose();
  EXPECT_EQ(matrix_checksum(row_source(W)), matrix_checksum(W));
  EXPECT_EQ(matrix_checksum(row_source(stored, Layout::kFeatureMajor)), matrix_checksum(W));
  const Matrix half = 0.5f * W;
  EXPECT_EQ(matrix_checksum(row_source(W, Layout::kRowMajor, 0.5f)), matrix_checksum(half));
  uint64_t rows_one_by_one = 0;
  RowSource src = row_source(W);
  for_each_row_block(
      src, [&](int64_t, int64_t n, const float*) { rows_one_by_one += n; }, 4 * 5);
  EXPECT_EQ(rows_one_by_one, 37u);
}

}  // namespace
}  // namespace sfb
