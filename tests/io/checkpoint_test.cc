#include "sfb/io/checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"

namespace sfb::io {
namespace {

using ::testing::HasSubstr;

std::string decode_error(std::string bytes) {
  try {
    decode_checkpoint(std::as_bytes(std::span(bytes.data(), bytes.size())), "ck.bin");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, RoundTripsThroughAFile) {
  const auto path = (std::filesystem::temp_directory_path() / ("ck_" + std::to_string(::getpid()))).string();
  const Checkpoint c{0x1234, 42, 300, 4, Matrix::Random(10, 785)};
  write_checkpoint(path, c);
  const Checkpoint r = read_checkpoint(path);
  EXPECT_EQ(r.fingerprint, c.fingerprint);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.clock, 300);
  EXPECT_EQ(r.ranks, 4);
  EXPECT_EQ(r.W, c.W);
  std::filesystem::remove(path);
}

TEST(Checkpoint, AClockPast2To53IsRefusedSoNoClockArithmeticOverflows) {
  for (const int64_t clock : {int64_t{1} << 53, (int64_t{1} << 53) + 1, std::numeric_limits<int64_t>::max() - 101}) {
    const Bytes b = encode_checkpoint({1, 2, clock, 2, Matrix::Zero(2, 3)});
    const std::string bytes(reinterpret_cast<const char*>(b.data()), b.size());
    if (clock <= (int64_t{1} << 53))
      EXPECT_EQ(decode_error(bytes), "") << clock;
    else
      EXPECT_THAT(decode_error(bytes), HasSubstr("clocks are 0 to 2^53")) << clock;
  }
}

TEST(Checkpoint, EveryCorruptionIsRefusedWithItsReason) {
  const Bytes encoded = encode_checkpoint({7, 1, 5, 2, Matrix::Random(3, 4)});
  const std::string good(reinterpret_cast<const char*>(encoded.data()), encoded.size());
  EXPECT_EQ(decode_error(good), "");
  EXPECT_THAT(decode_error(good.substr(0, 50)), HasSubstr("ck.bin: checkpoint is truncated"));
  EXPECT_THAT(decode_error(good.substr(0, good.size() - 4)), HasSubstr("data bytes, a 3 x 4 matrix needs 48"));
  std::string b = good;
  b[0] = 'X';
  EXPECT_THAT(decode_error(b), HasSubstr("bad magic"));
  b = good;
  b[8] = 2;
  EXPECT_THAT(decode_error(b), HasSubstr("version 2 is not supported"));
  b = good;
  b[kCheckpointHeaderBytes + 5] ^= 0x40;  // one bit of W
  EXPECT_THAT(decode_error(b), HasSubstr("checksum mismatch"));
  b = good;
  b[32] = 9;  // the clock: covered by the checksum too
  EXPECT_THAT(decode_error(b), HasSubstr("checksum mismatch"));
  b = good;
  b[40] = 0;  // ranks 0
  EXPECT_THAT(decode_error(b), HasSubstr("ranks 0 are invalid"));
  EXPECT_THROW(read_checkpoint("/nonexistent/ck.bin"), DataError);
}

}  // namespace
}  // namespace sfb::io
