#include "sfb/core/bytes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sfb {
namespace {

using ::testing::HasSubstr;

TEST(Bytes, FieldsRoundTripLittleEndian) {
  ByteWriter w;
  w.put<uint16_t>(0x0102);
  w.put<int64_t>(-5);
  const float f[2] = {1.5f, -2.0f};
  w.put_array(f, 2);
  w.put_at<uint16_t>(0, 0x0A0B);
  const Bytes b = w.take();
  ASSERT_EQ(b.size(), 2u + 8 + 8);
  EXPECT_EQ(b[0], std::byte{0x0B});  // least significant byte first
  ByteReader r(b, "test", ByteReader::Source::kFile);
  EXPECT_EQ(r.get<uint16_t>("a"), 0x0A0B);
  EXPECT_EQ(r.get<int64_t>("b"), -5);
  float g[2];
  r.get_array(g, 2, "c");
  EXPECT_EQ(g[1], -2.0f);
  EXPECT_NO_THROW(r.expect_end());
}

TEST(Bytes, ReadingPastTheEndThrowsTheSourcesErrorNamingFieldAndOffset) {
  const Bytes b(6);
  ByteReader file(b, "ck.bin", ByteReader::Source::kFile);
  file.get<uint32_t>("magic");
  EXPECT_THAT([&] { file.get<uint32_t>("version"); },
              ::testing::ThrowsMessage<DataError>(
                  HasSubstr("ck.bin: truncated: version needs 4 bytes at offset 4, only 2 left")));
  ByteReader msg(b, "SF batch", ByteReader::Source::kMessage);
  EXPECT_THROW(msg.skip(7, "header"), CommError);
  ByteReader rest(b, "x", ByteReader::Source::kMessage);
  rest.skip(2, "a");
  EXPECT_THAT([&] { rest.expect_end(); }, ::testing::ThrowsMessage<CommError>(HasSubstr("4 trailing bytes")));
}

}  // namespace
}  // namespace sfb
