// The stop protocol as a state machine, without threads or a transport: messages and local events
// in, control messages and clock-gate calls out.
#include "sfb/runtime/stop_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/comm/sf_codec.h"
#include "sfb/core/error.h"
#include "sfb/runtime/control_codec.h"
#include "testing/batches.h"

namespace sfb::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Sent {
  int dst;
  ControlType type;
  int64_t value;
  bool operator==(const Sent&) const = default;
};

// One rank's protocol with a recorded outbox and a fake clock gate.
struct Harness {
  std::vector<Sent> sent;
  std::vector<std::vector<int64_t>> payloads;
  int64_t started = 0;
  int pauses = 0;
  std::vector<int64_t> resumed;
  StopProtocol p;

  Harness(int rank, int workers, int64_t max_clocks = 100)
      : p(rank, workers, max_clocks,
          StopProtocolIo{[this](int dst, ControlType t, int64_t v, std::vector<int64_t> payload) {
                           sent.push_back({dst, t, v});
                           payloads.push_back(std::move(payload));
                         },
                         [this] {
                           ++pauses;
                           return started;
                         },
                         [this](int64_t at) { resumed.push_back(at); }}) {}
};

ControlMsg msg(ControlType t, int64_t value = 0, std::vector<int64_t> payload = {}) {
  return {t, 0, value, std::move(payload)};
}

TEST(StopProtocol, RootQueriesEveryRankAndStopsAtTheFurthestStartedClock) {
  Harness h(0, 3);
  h.started = 6;
  h.p.request_stop(StopReason::kTargetAccuracy);
  EXPECT_EQ(h.pauses, 1);
  EXPECT_THAT(h.sent, ElementsAre(Sent{1, ControlType::kStopQuery, 0}, Sent{2, ControlType::kStopQuery, 0}));
  EXPECT_THAT(h.p.waiting_for(), HasSubstr("STOP_REPLY from ranks 1, 2"));
  h.sent.clear();
  h.p.handle(msg(ControlType::kStopReply, 5), 1);
  EXPECT_TRUE(h.sent.empty());
  EXPECT_THAT(h.p.waiting_for(), HasSubstr("STOP_REPLY from ranks 2"));
  h.p.handle(msg(ControlType::kStopReply, 7), 2);
  EXPECT_THAT(h.sent, ElementsAre(Sent{1, ControlType::kStopAt, 7}, Sent{2, ControlType::kStopAt, 7}));
  EXPECT_THAT(h.resumed, ElementsAre(7));
  EXPECT_EQ(h.p.stop_reason(), StopReason::kTargetAccuracy);
  // A second reason changes nothing: one query per job.
  h.sent.clear();
  h.p.handle(msg(ControlType::kStopRequest, 15), 2);
  EXPECT_TRUE(h.sent.empty());
  EXPECT_EQ(h.p.stop_reason(), StopReason::kTargetAccuracy);
}

TEST(StopProtocol, StopAtIsCappedByMaxClocks) {
  Harness h(0, 2, 40);
  h.started = 38;
  h.p.request_stop(StopReason::kSignal, "rank 0 received signal 2");
  h.p.on_stop_reply(1, 45);
  EXPECT_THAT(h.resumed, ElementsAre(40));
  EXPECT_EQ(h.sent.back(), (Sent{1, ControlType::kStopAt, 40}));
}

TEST(StopProtocol, ASingleRankStopsWithoutMessages) {
  Harness h(0, 1);
  h.started = 3;
  h.p.request_stop(StopReason::kMaxSeconds);
  EXPECT_TRUE(h.sent.empty());
  EXPECT_THAT(h.resumed, ElementsAre(3));
  h.p.local_done(RankStats{});
  EXPECT_TRUE(h.p.try_finish());
}

TEST(StopProtocol, OtherRanksReplyResumeAndForwardTheirSignal) {
  Harness h(2, 3);
  h.started = 9;
  h.p.handle(msg(ControlType::kStopQuery), 0);
  EXPECT_THAT(h.sent, ElementsAre(Sent{0, ControlType::kStopReply, 9}));
  h.p.handle(msg(ControlType::kStopAt, 11), 0);
  EXPECT_THAT(h.resumed, ElementsAre(11));
  h.sent.clear();
  h.p.request_stop(StopReason::kSignal, "", 15);
  h.p.request_stop(StopReason::kSignal, "", 15);
  EXPECT_THAT(h.sent, ElementsAre(Sent{0, ControlType::kStopRequest, 15}));
  EXPECT_THROW(h.p.handle(msg(ControlType::kStopRequest, 2), 1), CommError) << "STOP_REQUEST goes to rank 0 only";
}

TEST(StopProtocol, RootSendsFinalOnlyWhenEveryRankIsDone) {
  Harness h(0, 3);
  RankStats own;
  own.clocks = 50;
  h.p.local_done(own);
  EXPECT_FALSE(h.p.try_finish());
  RankStats r1;
  r1.rank = 1;
  r1.checksum = 0xfedcba9876543210ULL;
  r1.update_s = 1.5;
  h.p.handle(msg(ControlType::kDone, 0, pack_stats(r1)), 1);
  EXPECT_FALSE(h.p.try_finish());
  EXPECT_THAT(h.p.waiting_for(), HasSubstr("DONE from ranks 2"));
  h.p.handle(msg(ControlType::kDone, 0, pack_stats(RankStats{})), 2);
  EXPECT_TRUE(h.p.try_finish());
  EXPECT_THAT(h.sent, ElementsAre(Sent{1, ControlType::kFinal, 0}, Sent{2, ControlType::kFinal, 0}));
  ASSERT_EQ(h.p.all_stats().size(), 3u);
  EXPECT_EQ(h.p.all_stats()[0].clocks, 50);
  EXPECT_EQ(h.p.all_stats()[1].checksum, 0xfedcba9876543210ULL);
  EXPECT_DOUBLE_EQ(h.p.all_stats()[1].update_s, 1.5);
}

TEST(StopProtocol, NoFinalWhileAQueryIsOpen) {
  Harness h(0, 2);
  h.p.request_stop(StopReason::kConverged);
  h.p.local_done(RankStats{});
  h.p.on_done(1, pack_stats(RankStats{}));
  EXPECT_FALSE(h.p.try_finish());
  h.p.on_stop_reply(1, 0);
  EXPECT_TRUE(h.p.try_finish());
}

TEST(StopProtocol, OtherRanksLeaveAfterDoneAndFinal) {
  Harness h(1, 2);
  EXPECT_FALSE(h.p.waiting_on_peers());
  h.p.local_done(RankStats{});
  EXPECT_TRUE(h.p.waiting_on_peers());
  EXPECT_EQ(h.p.waiting_for(), "FINAL from rank 0");
  EXPECT_EQ(h.sent.back().type, ControlType::kDone);
  EXPECT_EQ(h.payloads.back().size(), kRankStatsWords);
  EXPECT_FALSE(h.p.try_finish());
  h.p.handle(msg(ControlType::kFinal), 0);
  EXPECT_TRUE(h.p.try_finish());
}

TEST(StopProtocol, MessagesOutOfTurnAreProtocolErrors) {
  Harness root(0, 3);
  EXPECT_THAT([&] { root.p.handle(msg(ControlType::kStopReply, 1), 1); },
              ::testing::ThrowsMessage<CommError>(HasSubstr("unexpected STOP_REPLY from rank 1")));
  EXPECT_THAT([&] { root.p.handle(msg(ControlType::kStopQuery), 1); },
              ::testing::ThrowsMessage<CommError>(HasSubstr("is not meant for this rank")));
  EXPECT_THAT(
      [&] {
        root.p.handle(msg(ControlType::kDone, 0, {1, 2}), 1);
      },
      ::testing::ThrowsMessage<CommError>(HasSubstr("DONE from rank 1: 2 statistics words, expected 13")));
  root.p.handle(msg(ControlType::kDone, 0, pack_stats(RankStats{})), 2);
  EXPECT_THAT([&] { root.p.handle(msg(ControlType::kDone, 0, pack_stats(RankStats{})), 2); },
              ::testing::ThrowsMessage<CommError>(HasSubstr("a second DONE from rank 2")));
  root.p.request_stop(StopReason::kTargetObjective);
  root.p.on_stop_reply(1, 3);
  EXPECT_THROW(root.p.on_stop_reply(1, 3), CommError);
  Harness other(1, 3);
  EXPECT_THROW(other.p.handle(msg(ControlType::kDone, 0, pack_stats(RankStats{})), 0), CommError);
  EXPECT_THROW(other.p.handle(msg(ControlType::kStopAt, 4), 2), CommError) << "STOP_AT only comes from rank 0";
}

TEST(ControlCodec, EmptyPayloadDecodes) {
  // Regression (fuzz_wire under UBSan): memcpy into an empty vector's null data().
  const ControlMsg r = decode_control(encode_control({ControlType::kStopQuery, 1, 0, {}}), 1);
  EXPECT_TRUE(r.payload.empty());
}

TEST(ControlCodec, RoundTripsAndRejects) {
  const ControlMsg m{ControlType::kDone, 3, -5, {1, 2, 3}};
  const Bytes b = encode_control(m);
  const ControlMsg r = decode_control(b, 3);
  EXPECT_EQ(r.type, ControlType::kDone);
  EXPECT_EQ(r.value, -5);
  EXPECT_EQ(r.payload, m.payload);
  EXPECT_THROW(decode_control(b, 2), CommError);
  EXPECT_THROW(decode_control(Bytes(b.begin(), b.end() - 8), 3), CommError);
  Bytes bad = b;
  bad[12] = std::byte{99};  // type
  EXPECT_THROW(decode_control(bad, 3), CommError);
  EXPECT_THROW(
      decode_control(
          comm::encode_sf_batch(testing::sparse_sf_batch(1, 3, 100, Matrix::Ones(1, 3), {0, 1}, {5}, {1.0f})), 1),
      CommError);
}

}  // namespace
}  // namespace sfb::runtime
