#include "sfb/comm/transport/tcp_handshake.h"

#include <cstring>

namespace sfb::comm::tcp {

namespace {

constexpr uint32_t kHelloMagic = 0x48544653;  // "SFTH"
constexpr uint32_t kAckMagic = 0x4B544653;    // "SFTK"
constexpr uint32_t kVersion = 2;

std::span<const std::byte> text(const char* s) { return std::as_bytes(std::span(s, std::strlen(s))); }

// HMAC over the role, both ranks and both nonces.
Digest mac(const JobKey& key, const char* role, const Hello& h, const Nonce& nonce_a) {
  const std::array<int32_t, 2> ranks{h.from, h.to};
  return hmac_sha256(key, {text(role), std::as_bytes(std::span(ranks)), h.nonce, nonce_a});
}

constexpr const char* kAcceptorRole = "sfb tcp v2 acceptor";
constexpr const char* kConnectorRole = "sfb tcp v2 connector";

}  // namespace

JobKey random_job_key() {
  JobKey k;
  secure_random(k);
  return k;
}

JobKey mix_secret(const JobKey& job, const std::string& secret) {
  if (secret.empty()) return job;
  return hmac_sha256(std::as_bytes(std::span(secret.data(), secret.size())), {text("sfb job key"), job});
}

Nonce random_nonce() {
  Nonce n;
  secure_random(n);
  return n;
}

Bytes encode_hello(const Hello& h) {
  ByteWriter w(kHelloBytes);
  w.put<uint32_t>(kHelloMagic);
  w.put<uint32_t>(kVersion);
  w.put<int32_t>(h.from);
  w.put<int32_t>(h.to);
  w.put_array(std::span<const std::byte>(h.nonce));
  return w.take();
}

std::optional<Hello> decode_hello(std::span<const std::byte> b) {
  if (b.size() != kHelloBytes) return std::nullopt;
  ByteReader r(b, "hello", ByteReader::Source::kMessage);
  if (r.get<uint32_t>("magic") != kHelloMagic || r.get<uint32_t>("version") != kVersion) return std::nullopt;
  Hello h;
  h.from = r.get<int32_t>("from");
  h.to = r.get<int32_t>("to");
  r.get_array(h.nonce.data(), h.nonce.size(), "nonce");
  return h;
}

Bytes encode_reply(const JobKey& key, const Hello& h, const Nonce& nonce_a) {
  ByteWriter w(kReplyBytes);
  w.put<uint32_t>(kHelloMagic);
  w.put<uint32_t>(kVersion);
  w.put<int32_t>(h.to);
  w.put<int32_t>(h.from);
  w.put_array(std::span<const std::byte>(nonce_a));
  const Digest m = mac(key, kAcceptorRole, h, nonce_a);
  w.put_array(std::span<const std::byte>(m));
  return w.take();
}

std::optional<Nonce> check_reply(const JobKey& key, const Hello& h, std::span<const std::byte> reply) {
  if (reply.size() != kReplyBytes) return std::nullopt;
  ByteReader r(reply, "reply", ByteReader::Source::kMessage);
  if (r.get<uint32_t>("magic") != kHelloMagic || r.get<uint32_t>("version") != kVersion) return std::nullopt;
  if (r.get<int32_t>("from") != h.to || r.get<int32_t>("to") != h.from) return std::nullopt;
  Nonce nonce_a;
  r.get_array(nonce_a.data(), nonce_a.size(), "nonce");
  Digest got;
  r.get_array(got.data(), got.size(), "mac");
  if (!equal_constant_time(got, mac(key, kAcceptorRole, h, nonce_a))) return std::nullopt;
  return nonce_a;
}

Bytes encode_finish(const JobKey& key, const Hello& h, const Nonce& nonce_a) {
  const Digest m = mac(key, kConnectorRole, h, nonce_a);
  return Bytes(m.begin(), m.end());
}

bool check_finish(const JobKey& key, const Hello& h, const Nonce& nonce_a, std::span<const std::byte> finish) {
  return finish.size() == kFinishBytes && equal_constant_time(finish, mac(key, kConnectorRole, h, nonce_a));
}

Bytes encode_ack() {
  ByteWriter w(kAckBytes);
  w.put<uint32_t>(kAckMagic);
  return w.take();
}

bool check_ack(std::span<const std::byte> b) {
  uint32_t m = 0;
  if (b.size() != kAckBytes) return false;
  std::memcpy(&m, b.data(), 4);
  return m == kAckMagic;
}

}  // namespace sfb::comm::tcp
