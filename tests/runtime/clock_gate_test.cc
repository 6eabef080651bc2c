// ClockGate (runtime/clock_gate.h) alone: the staleness rule, the order of each sender's clocks,
// the stop protocol's pause and resume, the reconciliation barrier and abort.
#include "sfb/runtime/clock_gate.h"

#include <chrono>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"

namespace sfb::runtime {
namespace {

using ::testing::HasSubstr;

// Rank `rank` of `workers`, every worker a source (full broadcast), staleness `bound`.
ClockGate::Rule all_sources(int rank, int workers, int64_t bound) {
  ClockGate::Rule r;
  r.rank = rank;
  r.workers = workers;
  for (int q = 0; q < workers; ++q) r.sources.push_back(q);
  r.bound = bound;
  return r;
}

void apply(ClockGate& g, int sender, int64_t clock) {
  SfBatch b;
  b.sender = sender;
  b.clock = clock;
  const SfBatch* one = &b;
  g.applied({&one, 1});
}

// Whether clock c may start within `wait_s`: its CommError (the timeout) is "no".
bool starts_within(ClockGate& g, int64_t c, double wait_s = 0.05) {
  double waited = 0;
  try {
    return g.wait_for_clock(c, wait_s, &waited);
  } catch (const CommError&) {
    return false;
  }
}

// What the timeout says when clock c cannot start within 50 ms ("started" when it could).
std::string why_not_started(ClockGate& g, int64_t c) {
  double waited = 0;
  try {
    g.wait_for_clock(c, 0.05, &waited);
    return "started";
  } catch (const CommError& e) {
    return e.what();
  }
}

TEST(ClockGate, BspStartsAClockOnlyWhenEveryWorkersPreviousClockIsApplied) {
  ClockGate g(all_sources(0, 2, 0), 0, 100);
  EXPECT_TRUE(starts_within(g, 0));
  g.own_committed();
  apply(g, 0, 0);
  EXPECT_THAT(why_not_started(g, 1), HasSubstr("to start clock 1: no progress from rank 1 (received 0 of 1 clocks)"));
  g.received(1, 0);
  EXPECT_FALSE(starts_within(g, 1));  // arrived, not applied
  apply(g, 1, 0);
  EXPECT_TRUE(starts_within(g, 1));
  EXPECT_EQ(g.applied_by_every_source(), 1);
}

TEST(ClockGate, SspRunsAtMostTheBoundAheadOfTheSlowestWorkerAndAlwaysReadsItsOwnWrites) {
  const int64_t s = 2;
  ClockGate g(all_sources(0, 2, s), 0, 100);
  for (int64_t c = 0; c <= s; ++c) {  // rank 1 has applied nothing: clocks 0..s may still start
    EXPECT_TRUE(starts_within(g, c)) << c;
    g.own_committed();
    EXPECT_FALSE(starts_within(g, c + 1)) << "clock " << c + 1 << " before its own clock " << c << " is applied";
    apply(g, 0, c);
  }
  EXPECT_FALSE(starts_within(g, s + 1));  // needs rank 1's clock 0
  apply(g, 1, 0);
  EXPECT_TRUE(starts_within(g, s + 1));
  EXPECT_EQ(g.max_lead(), s);  // clock c started with rank 1's clocks < c - s applied
}

TEST(ClockGate, ASendersClockOutOfSequenceIsAnErrorNamingIt) {
  ClockGate g(all_sources(0, 3, 0), 5, 100);  // resumed at clock 5
  EXPECT_THROW(apply(g, 2, 4), CommError);
  try {
    apply(g, 2, 6);
    ADD_FAILURE() << "a gap in rank 2's clocks was taken";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("batch of clock 6 from rank 2 out of sequence (expected clock 5)"));
  }
  g.received(1, 5);
  try {
    g.received(1, 5);
    ADD_FAILURE() << "a repeat of rank 1's clock was taken";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("SF batch of clock 5 from rank 1, expected clock 6"));
  }
  EXPECT_THROW(g.applied_dense(6), CommError);
}

TEST(ClockGate, APauseHoldsNewClocksAndResumeSetsWhereEveryRankStops) {
  ClockGate g(all_sources(0, 1, 0), 0, 100);
  EXPECT_TRUE(starts_within(g, 0));
  apply(g, 0, 0);
  EXPECT_EQ(g.pause(), 1);               // one clock started
  EXPECT_FALSE(starts_within(g, 1));     // paused: waits for STOP_AT
  EXPECT_THROW(g.resume(0), CommError);  // before a clock already started
  g.resume(2);
  EXPECT_EQ(g.stop_at(), 2);
  EXPECT_TRUE(starts_within(g, 1));
  apply(g, 0, 1);
  EXPECT_FALSE(g.all_applied());
  double waited = 0;
  EXPECT_FALSE(g.wait_for_clock(2, 1.0, &waited));  // at stop_at: done, at once
  EXPECT_TRUE(g.all_applied());
  EXPECT_FALSE(g.done());
  g.update_finished();
  EXPECT_TRUE(g.done());
}

TEST(ClockGate, NoClockPassesTheNextReconciliationBeforeItIsDone) {
  ClockGate::Rule r = all_sources(0, 1, 1000);
  r.reconcile_every = 3;
  ClockGate g(std::move(r), 0, 100);
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_TRUE(starts_within(g, c));
    apply(g, 0, c);
  }
  EXPECT_THAT(why_not_started(g, 3), HasSubstr("the replica reconciliation at clock 3"));
  g.reconciled(3);
  EXPECT_TRUE(starts_within(g, 3));
}

TEST(ClockGate, AbortWakesAComputeThreadWaitingForAClock) {
  ClockGate g(all_sources(0, 2, 0), 0, 100);
  EXPECT_TRUE(starts_within(g, 0));
  apply(g, 0, 0);
  bool started = true, timed_out = false;
  std::thread waiter([&] {
    double waited = 0;
    try {
      started = g.wait_for_clock(1, 60.0, &waited);  // rank 1 never applies its clock 0
    } catch (const CommError&) {
      timed_out = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  g.abort();
  waiter.join();
  EXPECT_FALSE(started);
  EXPECT_FALSE(timed_out) << "abort did not wake the wait: it ran to its timeout";
}

}  // namespace
}  // namespace sfb::runtime
