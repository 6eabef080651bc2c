// SHA-256 and HMAC-SHA256 against the published vectors (FIPS 180-4 examples, RFC 4231), split
// updates against one-shot digests, and the CSPRNG's bytes.
#include "sfb/comm/transport/crypto.h"

#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace sfb::comm {
namespace {

std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

std::string hex(const Digest& d) {
  std::string out;
  for (std::byte b : d) out += fmt::format("{:02x}", std::to_integer<int>(b));
  return out;
}

TEST(Sha256, PublishedVectors) {
  EXPECT_EQ(hex(sha256(bytes(""))), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256(bytes("abc"))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256(bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  EXPECT_EQ(hex(sha256(bytes(million))), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, SplitUpdatesGiveTheOneShotDigest) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += static_cast<char>('a' + i % 26);
  for (size_t cut : {0, 1, 55, 56, 63, 64, 65, 119, 128, 299}) {
    Sha256 s;
    s.update(std::string_view(text).substr(0, cut));
    s.update(std::string_view(text).substr(cut));
    EXPECT_EQ(hex(s.finish()), hex(sha256(bytes(text)))) << "cut at " << cut;
  }
}

TEST(HmacSha256, Rfc4231Vectors) {
  const std::string key1(20, '\x0b');
  EXPECT_EQ(hex(hmac_sha256(bytes(key1), {bytes("Hi There")})),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256(bytes("Jefe"), {bytes("what do ya "), bytes("want for nothing?")})),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const std::string key6(131, '\xaa');
  EXPECT_EQ(hex(hmac_sha256(bytes(key6), {bytes("Test Using Larger Than Block-Size Key - Hash Key First")})),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(SecureRandom, FillsEveryByteAndNeverRepeats) {
  std::set<std::string> seen;
  for (int i = 0; i < 64; ++i) {
    Digest d{};
    secure_random(d);
    EXPECT_TRUE(seen.insert(hex(d)).second);
  }
  EXPECT_TRUE(equal_constant_time(bytes("same"), bytes("same")));
  EXPECT_FALSE(equal_constant_time(bytes("same"), bytes("samf")));
  EXPECT_FALSE(equal_constant_time(bytes("same"), bytes("sam")));
}

}  // namespace
}  // namespace sfb::comm
