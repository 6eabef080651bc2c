#pragma once
// The TCP transport's handshake (tcp_connect.cc runs it on every new connection): each end proves
// it holds the job's key without sending the key, so only ranks of this job are admitted.
//
//   connector -> acceptor   hello   magic "SFTH", version, from, to, nonce_c (16 random bytes)   32 B
//   acceptor  -> connector  reply   magic, version, from, to, nonce_a, HMAC(key, acceptor | ...)  64 B
//   connector -> acceptor   finish  HMAC(key, connector | ...)                                     32 B
//   acceptor  -> connector  ack     magic "SFTK"                                                   4 B
//
// Both MACs cover a role label, both ranks and both nonces, so a reply is no finish (no
// reflection), a recorded finish answers no other nonce (no replay) and a hello for another rank
// pair is refused. The key is 32 bytes from getrandom on rank 0, handed to the other ranks by the
// bootstrap (MPI), mixed with the user's comm.secret_file when there is one. Internal to
// comm/transport.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "sfb/comm/transport/crypto.h"
#include "sfb/core/bytes.h"

namespace sfb::comm::tcp {

using JobKey = std::array<std::byte, 32>;
using Nonce = std::array<std::byte, 16>;

constexpr size_t kHelloBytes = 32;
constexpr size_t kReplyBytes = 64;
constexpr size_t kFinishBytes = 32;
constexpr size_t kAckBytes = 4;

struct Hello {
  int from = -1;  // the connecting rank
  int to = -1;    // the accepting rank
  Nonce nonce{};  // the connector's
};

// A fresh key (getrandom), and the key the ranks use: the job's own, or both mixed by HMAC when the
// user gave a secret.
JobKey random_job_key();
JobKey mix_secret(const JobKey& job, const std::string& secret);
Nonce random_nonce();

Bytes encode_hello(const Hello& h);
// nullopt when the bytes are not an sfb hello of this version (a stray or hostile connection).
std::optional<Hello> decode_hello(std::span<const std::byte> b);

// The acceptor's reply to `h` with its own nonce.
Bytes encode_reply(const JobKey& key, const Hello& h, const Nonce& nonce_a);
// The connector's check of a reply to the hello it sent: the acceptor's nonce when it is from
// rank h.to for rank h.from and its MAC proves the key, else nullopt.
std::optional<Nonce> check_reply(const JobKey& key, const Hello& h, std::span<const std::byte> reply);

Bytes encode_finish(const JobKey& key, const Hello& h, const Nonce& nonce_a);
// The acceptor's check of a finish: true when it answers this hello and this nonce with the key.
bool check_finish(const JobKey& key, const Hello& h, const Nonce& nonce_a, std::span<const std::byte> finish);

Bytes encode_ack();
bool check_ack(std::span<const std::byte> b);

}  // namespace sfb::comm::tcp
