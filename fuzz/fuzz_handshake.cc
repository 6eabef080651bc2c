// Fuzzes the TCP handshake's decoders (tcp_handshake.h), what a hostile connection feeds a rank
// first: a hello decodes only to what encodes back to the same bytes, and no reply, finish or ack
// that was not made with the job's key is accepted.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "sfb/comm/transport/tcp_handshake.h"

namespace tcp = sfb::comm::tcp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = std::as_bytes(std::span(data, size));
  if (const auto h = tcp::decode_hello(in)) {
    const sfb::Bytes again = tcp::encode_hello(*h);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  }
  tcp::JobKey key{};
  key[0] = std::byte{7};
  tcp::Hello h{0, 1, {}};
  tcp::Nonce nonce_a{};
  nonce_a[3] = std::byte{9};
  // A forged answer equals the real one only by finding the MAC: bytes that pass are exactly those.
  if (tcp::check_reply(key, h, in)) {
    const sfb::Bytes real = tcp::encode_reply(key, h, nonce_a);
    if (size != real.size()) __builtin_trap();
  }
  if (tcp::check_finish(key, h, nonce_a, in)) {
    const sfb::Bytes real = tcp::encode_finish(key, h, nonce_a);
    if (real.size() != size || std::memcmp(real.data(), data, size) != 0) __builtin_trap();
  }
  tcp::check_ack(in);
  return 0;
}
