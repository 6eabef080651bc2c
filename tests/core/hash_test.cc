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

}  // namespace
}  // namespace sfb
