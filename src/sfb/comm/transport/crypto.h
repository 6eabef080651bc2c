#pragma once
// The few cryptographic pieces the TCP transport's handshake needs (comm/transport/tcp_handshake.h):
// SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104), bytes from the kernel's CSPRNG, and a comparison
// whose time does not depend on where two MACs differ. Written here rather than linked from
// OpenSSL: sfb authenticates its connection set-up, it does not encrypt traffic, and these ~150
// lines are checked against the published test vectors (tests/comm/crypto_test.cc).
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace sfb::comm {

using Digest = std::array<std::byte, 32>;

// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::byte> data);
  void update(std::string_view text) { update(std::as_bytes(std::span(text.data(), text.size()))); }
  Digest finish();  // the object is spent afterwards

 private:
  void block(const std::byte* p);
  std::array<uint32_t, 8> h_;
  std::array<std::byte, 64> buf_{};
  size_t used_ = 0;
  uint64_t total_ = 0;
};

Digest sha256(std::span<const std::byte> data);

// HMAC-SHA256 of the concatenation of `parts` under `key`.
Digest hmac_sha256(std::span<const std::byte> key, std::initializer_list<std::span<const std::byte>> parts);

// Fills `out` from getrandom(2) (the kernel's CSPRNG); throws Error if the kernel refuses.
void secure_random(std::span<std::byte> out);

// a == b in time that depends only on their sizes.
bool equal_constant_time(std::span<const std::byte> a, std::span<const std::byte> b);

}  // namespace sfb::comm
