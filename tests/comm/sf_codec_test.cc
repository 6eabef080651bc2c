#include "sfb/comm/sf_codec.h"

#include <cstring>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"
#include "testing/batches.h"

namespace sfb::comm {
namespace {

using ::testing::HasSubstr;

SfBatch dense_batch(int32_t k, int32_t j, int32_t d) {
  return testing::dense_sf_batch(2, 17, Matrix::Random(k, j), Matrix::Random(k, d));
}

SfBatch sparse_batch() {
  return testing::sparse_sf_batch(1, 3, 100, Matrix::Random(3, 4), {0, 2, 2, 5}, {3, 50, 0, 1, 99}, {1, 2, 3, 4, 5});
}

std::string comm_error(const Bytes& bytes, SfExpect ex) {
  try {
    decode_sf_batch(bytes, ex);
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

template <typename T>
void put_at(Bytes& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof(T));
}

class DenseSizes : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(DenseSizes, RoundTrips) {
  auto [k, j, d] = GetParam();
  const SfBatch b = dense_batch(k, j, d);
  const Bytes bytes = encode_sf_batch(b);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), encoded_sf_bytes(b));
  EXPECT_EQ(bytes.size(), kSfHeaderBytes + 4u * k * (j + d));
  const SfBatch r = decode_sf_batch(bytes, {2, j, d});
  EXPECT_EQ(r.sender, 2);
  EXPECT_EQ(r.clock, 17);
  EXPECT_EQ(r.count, k);
  EXPECT_EQ(r.u, b.u);
  EXPECT_EQ(r.v, b.v);
}

INSTANTIATE_TEST_SUITE_P(Codec, DenseSizes,
                         ::testing::Values(std::tuple{0, 1, 1}, std::tuple{1, 1, 1}, std::tuple{3, 5, 7},
                                           std::tuple{64, 10, 785}));

TEST(Codec, SparseRoundTrips) {
  const SfBatch b = sparse_batch();
  const Bytes bytes = encode_sf_batch(b);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), encoded_sf_bytes(b));
  const SfBatch r = decode_sf_batch(bytes, {1, 4, 100});
  EXPECT_TRUE(r.sparse_v);
  EXPECT_EQ(r.u, b.u);
  EXPECT_EQ(r.v_row_ptr, b.v_row_ptr);
  EXPECT_EQ(r.v_index, b.v_index);
  EXPECT_EQ(r.v_value, b.v_value);
}

TEST(Codec, RejectsTruncatedOversizedAndGarbled) {
  const Bytes good = encode_sf_batch(dense_batch(2, 3, 4));
  const SfExpect ex{2, 3, 4};
  EXPECT_THAT(comm_error(Bytes(good.begin(), good.begin() + 10), ex), HasSubstr("shorter than the 56-byte header"));
  EXPECT_THAT(comm_error(Bytes(good.begin(), good.end() - 1), ex),
              HasSubstr("received 55 payload bytes, header says 56"));
  Bytes longer = good;
  longer.push_back(std::byte{0});
  EXPECT_THAT(comm_error(longer, ex), HasSubstr("received 57 payload bytes"));
  Bytes b = good;
  put_at<uint32_t>(b, 0, 0xdeadbeef);
  EXPECT_THAT(comm_error(b, ex), HasSubstr("bad magic"));
  b = good;
  put_at<uint16_t>(b, 4, 7);
  EXPECT_THAT(comm_error(b, ex), HasSubstr("wire version 7 is not supported"));
  b = good;
  put_at<int32_t>(b, 12, 1 << 30);
  EXPECT_THAT(comm_error(b, ex), HasSubstr("count 1073741824 outside"));
  b = good;
  put_at<int64_t>(b, 48, int64_t{1} << 40);
  EXPECT_THAT(comm_error(b, ex), HasSubstr("header says 1099511627776 payload bytes, its shape needs 56"));
  b = good;
  put_at<uint32_t>(b, 32, 6);
  EXPECT_THAT(comm_error(b, ex), HasSubstr("unknown flags"));
}

TEST(Codec, RejectsWrongSenderAndShape) {
  const Bytes good = encode_sf_batch(dense_batch(2, 3, 4));
  EXPECT_THAT(comm_error(good, {1, 3, 4}), HasSubstr("header names sender 2 but it came from rank 1"));
  EXPECT_THAT(comm_error(good, {2, 5, 4}), HasSubstr("J = 3, this worker has J = 5"));
  EXPECT_THAT(comm_error(good, {2, 3, 9}), HasSubstr("D = 4, this worker has D = 9"));
}

TEST(Codec, RejectsBadSparseStructure) {
  SfBatch s = sparse_batch();
  s.v_index[1] = 100;
  EXPECT_THAT(comm_error(encode_sf_batch(s), {1, 4, 100}), HasSubstr("sparse index 100 outside [0, 100)"));
  s = sparse_batch();
  s.v_row_ptr = {0, 3, 2, 5};
  EXPECT_THAT(comm_error(encode_sf_batch(s), {1, 4, 100}), HasSubstr("row pointer 2 decreases"));
}

TEST(Codec, RandomCorruptionNeverCrashes) {
  const Bytes good = encode_sf_batch(sparse_batch());
  std::mt19937 rng(5);
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Bytes b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % kSfHeaderBytes] = static_cast<std::byte>(rng());
    if (rng() % 3 == 0) b.resize(rng() % (good.size() + 16));
    try {
      const SfBatch r = decode_sf_batch(b, {-1, -1, -1});
      EXPECT_EQ(static_cast<int64_t>(b.size()), encoded_sf_bytes(r));
    } catch (const CommError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 2500);
}

TEST(Codec, EmptyPayloadsDecode) {
  // Regression (fuzz_wire under UBSan): memcpy into an empty vector's null data().
  const SfBatch b = decode_sf_batch(encode_sf_batch(dense_batch(0, 3, 4)), {2, 3, 4});
  EXPECT_EQ(b.count, 0);
}

}  // namespace
}  // namespace sfb::comm
