// The TCP transport's handshake (comm/transport/tcp_handshake.h) as an attacker would try it: a
// forged finish, a recorded finish replayed against a fresh nonce, the acceptor's own MAC
// reflected, another job's key, a hello for another pair of ranks; and the secret's part of the key.
#include "sfb/comm/transport/tcp_handshake.h"

#include <gtest/gtest.h>

namespace sfb::comm::tcp {
namespace {

struct Exchange {
  Hello hello;
  Nonce nonce_a;
  Bytes reply, finish;
};

Exchange honest(const JobKey& key, int from, int to) {
  Exchange e;
  e.hello = {from, to, random_nonce()};
  const auto decoded = decode_hello(encode_hello(e.hello));
  EXPECT_TRUE(decoded.has_value());
  e.nonce_a = random_nonce();
  e.reply = encode_reply(key, *decoded, e.nonce_a);
  const auto got = check_reply(key, e.hello, e.reply);
  EXPECT_TRUE(got.has_value());
  e.finish = encode_finish(key, e.hello, *got);
  return e;
}

TEST(TcpHandshake, BothEndsWithTheKeyAgree) {
  const JobKey key = random_job_key();
  const auto e = honest(key, 3, 1);
  EXPECT_TRUE(check_finish(key, e.hello, e.nonce_a, e.finish));
  EXPECT_EQ(decode_hello(encode_hello(e.hello))->from, 3);
  EXPECT_EQ(decode_hello(encode_hello(e.hello))->to, 1);
  EXPECT_TRUE(check_ack(encode_ack()));
}

TEST(TcpHandshake, AForgedFinishIsRefused) {
  const JobKey key = random_job_key();
  const auto e = honest(key, 2, 0);
  Bytes forged(kFinishBytes);
  secure_random(forged);
  EXPECT_FALSE(check_finish(key, e.hello, e.nonce_a, forged));
  Bytes flipped = e.finish;
  flipped[7] ^= std::byte{1};
  EXPECT_FALSE(check_finish(key, e.hello, e.nonce_a, flipped));
  EXPECT_FALSE(check_finish(key, e.hello, e.nonce_a, Bytes(e.finish.begin(), e.finish.end() - 1)));
}

TEST(TcpHandshake, ARecordedExchangeReplayedAgainstAFreshNonceIsRefused) {
  const JobKey key = random_job_key();
  const auto recorded = honest(key, 2, 0);
  // The intruder resends the recorded hello; the acceptor answers with a nonce of its own.
  const auto hello = decode_hello(encode_hello(recorded.hello));
  const Nonce fresh = random_nonce();
  EXPECT_FALSE(check_finish(key, *hello, fresh, recorded.finish));
  // A recorded reply does not convince a connector whose hello had another nonce either.
  Hello mine = recorded.hello;
  mine.nonce = random_nonce();
  EXPECT_FALSE(check_reply(key, mine, recorded.reply).has_value());
}

TEST(TcpHandshake, TheAcceptorsMacReflectedIsNoFinish) {
  const JobKey key = random_job_key();
  const auto e = honest(key, 1, 0);
  const Bytes acceptor_mac(e.reply.end() - kFinishBytes, e.reply.end());
  EXPECT_FALSE(check_finish(key, e.hello, e.nonce_a, acceptor_mac));
}

TEST(TcpHandshake, AnotherJobsKeyOrAnotherRankPairIsRefused) {
  const JobKey key = random_job_key(), other = random_job_key();
  EXPECT_NE(key, other);
  const auto e = honest(key, 2, 1);
  EXPECT_FALSE(check_reply(other, e.hello, e.reply).has_value());
  EXPECT_FALSE(check_finish(other, e.hello, e.nonce_a, e.finish));
  Hello swapped = e.hello;
  swapped.from = 3;
  EXPECT_FALSE(check_finish(key, swapped, e.nonce_a, e.finish));
  EXPECT_FALSE(check_reply(key, swapped, e.reply).has_value());
}

TEST(TcpHandshake, StrayBytesAreNoHello) {
  EXPECT_FALSE(decode_hello(Bytes(kHelloBytes)).has_value());
  EXPECT_FALSE(decode_hello(Bytes(3)).has_value());
  Bytes old = encode_hello({1, 0, random_nonce()});
  old[4] = std::byte{1};  // version 1: the token hello this replaced
  EXPECT_FALSE(decode_hello(old).has_value());
}

TEST(TcpHandshake, TheSecretChangesTheKeyAndNoSecretKeepsIt) {
  const JobKey job = random_job_key();
  EXPECT_EQ(mix_secret(job, ""), job);
  const JobKey a = mix_secret(job, "a secret of 16 bytes"), b = mix_secret(job, "a secret of 16 bytez");
  EXPECT_NE(a, job);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, mix_secret(job, "a secret of 16 bytes"));
}

}  // namespace
}  // namespace sfb::comm::tcp
