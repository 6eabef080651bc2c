// The sufficient-factor all-gather (comm/sf_allgather.h) and the several-batches message of the
// wire codec it sends: every rank gets every rank's batches in rank order, bitwise as sent;
// messages of a later call that arrive early wait for their call; malformed messages are refused
// naming the batch.
#include "sfb/comm/sf_allgather.h"

#include <chrono>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/comm/sf_codec.h"
#include "sfb/core/error.h"
#include "testing/rank_threads.h"

namespace sfb::comm {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Rank r's batch i of call `call`: r + 1 rows (counts differ by rank), J = 3 + i, D = 5.
SfBatch batch(int r, int i, int call) {
  SfBatch b;
  b.count = r + 1;
  b.J = 3 + i;
  b.D = 5;
  b.u.resize(b.count, b.J);
  b.v.resize(b.count, b.D);
  for (Eigen::Index k = 0; k < b.u.size(); ++k) b.u.data()[k] = 0.1f * static_cast<float>(k + 100 * r + 10 * call);
  for (Eigen::Index k = 0; k < b.v.size(); ++k) b.v.data()[k] = -0.3f * static_cast<float>(k + r + i);
  return b;
}

TEST(SfAllgather, EveryRankGetsEveryRanksBatchesInRankOrder) {
  const int P = 4;
  std::vector<std::vector<std::vector<SfBatch>>> got(P);
  testing::run_ranks(P, [&](Transport& t) {
    TransportChannel ch(t, kTagSf);
    SfAllgather ag(ch);
    const int r = t.rank();
    // Rank 0 is late to the first call: the others' second-call messages reach it first.
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int call = 0; call < 2; ++call) {
      auto all = ag.run({batch(r, 0, call), batch(r, 1, call)}, 7 + call);
      if (call == 0) got[static_cast<size_t>(r)] = std::move(all);
    }
  });
  for (int r = 0; r < P; ++r) {
    ASSERT_EQ(got[static_cast<size_t>(r)].size(), static_cast<size_t>(P));
    for (int q = 0; q < P; ++q)
      for (int i = 0; i < 2; ++i) {
        const SfBatch& b = got[static_cast<size_t>(r)][static_cast<size_t>(q)][static_cast<size_t>(i)];
        const SfBatch want = batch(q, i, 0);
        EXPECT_EQ(b.sender, q);
        EXPECT_EQ(b.clock, 7);
        EXPECT_EQ(b.u, want.u) << "rank " << r << " from " << q << " batch " << i;
        EXPECT_EQ(b.v, want.v);
      }
  }
}

TEST(SfBatchesMessage, RoundTripsAndRefusesTruncatedOrTrailingBytes) {
  std::vector<SfBatch> in = {batch(1, 0, 0), batch(0, 2, 0)};
  const Bytes msg = encode_sf_batches(in);
  EXPECT_EQ(static_cast<int64_t>(msg.size()), encoded_sf_bytes(in[0]) + encoded_sf_bytes(in[1]));
  const std::vector<SfExpect> ex = {{-1, 3, 5}, {-1, 5, 5}};
  const auto out = decode_sf_batches(msg, ex);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].u, in[1].u);
  EXPECT_EQ(out[0].v, in[0].v);
  EXPECT_THAT([&] { decode_sf_batches(std::span(msg).first(msg.size() - 4), ex); },
              ThrowsMessage<CommError>(HasSubstr("batch 1 says")));
  Bytes longer = msg;
  longer.resize(msg.size() + 8);
  EXPECT_THAT([&] { decode_sf_batches(longer, ex); }, ThrowsMessage<CommError>(HasSubstr("8 bytes after the last")));
  EXPECT_THAT([&] { decode_sf_batches(std::span(msg).first(60), ex); },
              ThrowsMessage<CommError>(HasSubstr("batch 0 says")));
  const std::vector<SfExpect> wrong = {{-1, 3, 5}, {-1, 4, 5}};
  EXPECT_THAT([&] { decode_sf_batches(msg, wrong); }, ThrowsMessage<CommError>(HasSubstr("J = 5")));
}

}  // namespace
}  // namespace sfb::comm
