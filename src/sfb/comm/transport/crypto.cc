#include "sfb/comm/transport/crypto.h"

#include <sys/random.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::comm {

namespace {

constexpr std::array<uint32_t, 64> kK = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t load_be32(const std::byte* p) {
  return (std::to_integer<uint32_t>(p[0]) << 24) | (std::to_integer<uint32_t>(p[1]) << 16) |
         (std::to_integer<uint32_t>(p[2]) << 8) | std::to_integer<uint32_t>(p[3]);
}

void store_be32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (24 - 8 * i));
}

}  // namespace

Sha256::Sha256() : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::block(const std::byte* p) {
  std::array<uint32_t, 64> w;
  for (int i = 0; i < 16; ++i) w[i] = load_be32(p + 4 * i);
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = std::rotr(w[i - 15], 7) ^ std::rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = std::rotr(w[i - 2], 17) ^ std::rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  auto v = h_;
  for (int i = 0; i < 64; ++i) {
    const uint32_t S1 = std::rotr(v[4], 6) ^ std::rotr(v[4], 11) ^ std::rotr(v[4], 25);
    const uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
    const uint32_t t1 = v[7] + S1 + ch + kK[i] + w[i];
    const uint32_t S0 = std::rotr(v[0], 2) ^ std::rotr(v[0], 13) ^ std::rotr(v[0], 22);
    const uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
    const uint32_t t2 = S0 + maj;
    v = {t1 + t2, v[0], v[1], v[2], v[3] + t1, v[4], v[5], v[6]};
  }
  for (int i = 0; i < 8; ++i) h_[i] += v[i];
}

void Sha256::update(std::span<const std::byte> data) {
  if (data.empty()) return;  // (a default span's null data never reaches memcpy)
  total_ += data.size();
  size_t i = 0;
  if (used_ > 0) {
    const size_t n = std::min(data.size(), 64 - used_);
    std::memcpy(buf_.data() + used_, data.data(), n);
    used_ += n;
    i = n;
    if (used_ < 64) return;
    block(buf_.data());
    used_ = 0;
  }
  for (; i + 64 <= data.size(); i += 64) block(data.data() + i);
  std::memcpy(buf_.data(), data.data() + i, data.size() - i);
  used_ = data.size() - i;
}

Digest Sha256::finish() {
  const uint64_t bits = total_ * 8;
  std::array<std::byte, 72> pad{};
  pad[0] = std::byte{0x80};
  const size_t zeros = (used_ < 56 ? 56 - used_ : 120 - used_);
  for (int i = 0; i < 8; ++i) pad[zeros + static_cast<size_t>(i)] = static_cast<std::byte>(bits >> (56 - 8 * i));
  update(std::span<const std::byte>(pad.data(), zeros + 8));
  Digest out;
  for (int i = 0; i < 8; ++i) store_be32(out.data() + 4 * i, h_[i]);
  return out;
}

Digest sha256(std::span<const std::byte> data) {
  Sha256 s;
  s.update(data);
  return s.finish();
}

Digest hmac_sha256(std::span<const std::byte> key, std::initializer_list<std::span<const std::byte>> parts) {
  std::array<std::byte, 64> k{};
  if (key.size() > k.size()) {
    const Digest d = sha256(key);
    std::memcpy(k.data(), d.data(), d.size());
  } else if (!key.empty()) {
    std::memcpy(k.data(), key.data(), key.size());
  }
  std::array<std::byte, 64> ipad, opad;
  for (size_t i = 0; i < k.size(); ++i) {
    ipad[i] = k[i] ^ std::byte{0x36};
    opad[i] = k[i] ^ std::byte{0x5c};
  }
  Sha256 inner;
  inner.update(ipad);
  for (const auto& p : parts) inner.update(p);
  const Digest ih = inner.finish();
  Sha256 outer;
  outer.update(opad);
  outer.update(ih);
  return outer.finish();
}

void secure_random(std::span<std::byte> out) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("getrandom: {}", std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
}

bool equal_constant_time(std::span<const std::byte> a, std::span<const std::byte> b) {
  if (a.size() != b.size()) return false;
  std::byte diff{0};
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == std::byte{0};
}

}  // namespace sfb::comm
