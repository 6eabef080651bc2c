// sfb's all-reduce (comm/allreduce.h): every element is summed in rank order, so the sums do not
// depend on the chunking, the segment size or the algorithm, and every rank gets the same bits;
// small and large buffers, 1..7 ranks, on the in-process transport and on TCP; messages that do not
// fit the call are refused, and a rank that falls silent is reported within the peer timeout.
#include "sfb/comm/allreduce.h"

#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"
#include "sfb/core/rng.h"
#include "testing/rank_threads.h"

namespace sfb::comm {
namespace {

using ::testing::HasSubstr;

std::vector<float> random_values(int rank, int64_t n, uint64_t seed = 1) {
  Rng rng = make_rng(seed, static_cast<uint64_t>(rank));
  std::normal_distribution<float> g(0, 1e3f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = g(rng);
  return v;
}

// ((0 + x_0) + x_1) + ...: what every rank must get, bit for bit.
std::vector<float> rank_order_sum(int P, int64_t n, uint64_t seed = 1) {
  std::vector<float> s(static_cast<size_t>(n), 0.0f);
  for (int r = 0; r < P; ++r) {
    const auto v = random_values(r, n, seed);
    for (size_t i = 0; i < s.size(); ++i) s[i] += v[i];
  }
  return s;
}

// The engine with a small segment so even test-sized buffers go through many segments and windows.
AllreduceOptions small_segments() {
  AllreduceOptions o;
  o.min_segment_bytes = o.max_segment_bytes = 64;
  o.window_bytes = 128;
  return o;
}

class Sizes : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(Sizes, EveryRankGetsTheRankOrderSumBitwise) {
  // Plain variables, not a structured binding: clang 14 cannot capture bindings in the lambda.
  const std::string transport = std::get<0>(GetParam());
  const int P = std::get<1>(GetParam());
  const int n = std::get<2>(GetParam());
  const auto want = rank_order_sum(P, n);
  std::vector<std::vector<float>> got(static_cast<size_t>(P));
  testing::run_ranks_on(transport, P, [&](Transport& t) {
    TransportChannel ch(t, kTagReduce);
    int64_t id = 0;  // the ids of the engines on one channel increase together
    for (AllreduceOptions opt : {AllreduceOptions{}, small_segments()}) {
      RankOrderAllreduce ar(ch, P, opt);
      for (int rep = 0; rep < 2; ++rep) {
        auto v = random_values(t.rank(), n);
        ar.run(v, ++id);
        if (rep == 1 && opt.max_segment_bytes == 64) got[static_cast<size_t>(t.rank())] = v;
        EXPECT_EQ(v, want) << "rank " << t.rank() << " segment " << opt.max_segment_bytes << " id " << id;
      }
    }
  });
  for (const auto& v : got) EXPECT_EQ(v, want);
}

INSTANTIATE_TEST_SUITE_P(RanksAndSizes, Sizes,
                         ::testing::Combine(::testing::Values("inproc"), ::testing::Values(1, 2, 3, 4, 7),
                                            ::testing::Values(0, 1, 5, 1000, 20000)));
INSTANTIATE_TEST_SUITE_P(Tcp, Sizes,
                         ::testing::Combine(::testing::Values("tcp"), ::testing::Values(3, 4),
                                            ::testing::Values(1, 1000, 100000)));

TEST(RankOrderAllreduce, SumsDoNotDependOnTheChunkingOrTheAlgorithm) {
  const int P = 4;
  const int64_t n = 5001;
  const auto want = rank_order_sum(P, n);
  testing::run_ranks(P, [&](Transport& t) {
    TransportChannel ch(t, kTagReduce);
    RankOrderAllreduce direct(ch, P), segmented(ch, P, small_segments());
    direct.set_cost({1e9, 1e-9});    // start-up dominates: always the direct algorithm
    segmented.set_cost({0.0, 1.0});  // bytes dominate: always segmented
    ASSERT_EQ(direct.algo_for(4 * n), RankOrderAllreduce::Algo::kDirect);
    ASSERT_EQ(segmented.algo_for(4), RankOrderAllreduce::Algo::kSegmented);
    auto a = random_values(t.rank(), n);
    direct.run(a, 1);
    auto b = random_values(t.rank(), n);
    segmented.run(std::span<float>(b.data(), 37), 2);
    segmented.run(std::span<float>(b.data() + 37, n - 37), 3);
    EXPECT_EQ(a, want);
    EXPECT_EQ(b, want);
  });
}

TEST(RankOrderAllreduce, SumsAreInRankOrderOnEveryRank) {
  // 1e8 + -1e8 + 1 is 1 in rank order (0, 1, 2), but 0 in the order (1e8 + 1) + -1e8.
  const std::vector<float> by_rank = {1e8f, -1e8f, 1.0f};
  testing::run_ranks(3, [&](Transport& t) {
    TransportChannel ch(t, kTagReduce);
    int64_t id = 0;
    for (const LinkCost cost : {LinkCost{1e9, 1e-9}, LinkCost{0.0, 1.0}}) {  // direct, then segmented
      std::vector<float> v(50, by_rank[static_cast<size_t>(t.rank())]);
      RankOrderAllreduce ar(ch, 3, {8, 8, 8});
      ar.set_cost(cost);
      ar.run(v, id++);
      EXPECT_EQ(v, std::vector<float>(50, 1.0f));
    }
  });
}

TEST(RankOrderAllreduce, RanksAheadOfTheOthersDoNotMixCalls) {
  // Rank 0 runs its calls with pauses: the others' next call's messages reach it early and wait.
  const int P = 3;
  testing::run_ranks(P, [&](Transport& t) {
    TransportChannel ch(t, kTagReduce);
    RankOrderAllreduce ar(ch, P, small_segments());
    for (int64_t id = 0; id < 20; ++id) {
      if (t.rank() == 0 && id % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::vector<float> v(static_cast<size_t>(100 + id), static_cast<float>(t.rank() + id));
      ar.run(v, id);
      EXPECT_EQ(v[0], static_cast<float>(3 * id + 3));
    }
  });
}

TEST(RankOrderAllreduce, AMessageOfAnotherCallOrShapeIsRefused) {
  // Rank 1 labels its messages with an older call's id: rank 0 refuses them instead of adding them.
  EXPECT_THAT(
      [] {
        testing::run_ranks(2, [&](Transport& t) {
          TransportChannel ch(t, kTagReduce);
          t.set_peer_timeout(2);
          std::vector<float> v(4, 1.0f);
          RankOrderAllreduce ar(ch, 2);
          if (t.rank() == 1) ar.run(v, 1);
          ar.run(v, 2);
        });
      },
      ::testing::ThrowsMessage<CommError>(HasSubstr("finished all-reduce 1")));
  // Ranks that disagree on the size are told so, not left waiting.
  EXPECT_THAT(
      [] {
        testing::run_ranks(2, [&](Transport& t) {
          TransportChannel ch(t, kTagReduce);
          t.set_peer_timeout(2);
          std::vector<float> v(static_cast<size_t>(t.rank() == 0 ? 4 : 5), 1.0f);
          RankOrderAllreduce(ch, 2).run(v, 1);
        });
      },
      ::testing::ThrowsMessage<CommError>(HasSubstr("do the ranks run the same all-reduce")));
}

TEST(RankOrderAllreduce, ARankThatFallsSilentIsReportedWithinTheTimeout) {
  // Rank 2 never takes part: ranks 0 and 1 fail after their peer timeout, naming what they miss.
  std::atomic<int> failed{0};
  testing::run_ranks(3, [&](Transport& t) {
    if (t.rank() == 2) return;
    t.set_peer_timeout(0.3);
    TransportChannel ch(t, kTagReduce);
    std::vector<float> v(1 << 16, 1.0f);
    const auto t0 = SteadyClock::now();
    try {
      RankOrderAllreduce(ch, 3, small_segments()).run(v, 1);
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(), HasSubstr("no all-reduce message for 0.3 s"));
      EXPECT_LT(std::chrono::duration<double>(SteadyClock::now() - t0).count(), 5.0);
      failed.fetch_add(1);
    }
  });
  EXPECT_EQ(failed.load(), 2);
}

TEST(QueueChannel, CarriesTheAllreduceWhenAnotherThreadReceives) {
  // As in the dense all-reduce baseline: a receiver thread feeds the channel, the algorithm waits on it.
  const int P = 3;
  const auto want = rank_order_sum(P, 777);
  testing::run_ranks(P, [&](Transport& t) {
    QueueChannel ch(t, kTagReduce);
    std::atomic<bool> done{false};
    std::thread feeder([&] {
      while (!done.load())
        if (auto m = t.try_recv(kTagReduce))
          ch.push(std::move(*m));
        else
          std::this_thread::yield();
    });
    auto v = random_values(t.rank(), 777);
    RankOrderAllreduce(ch, P, small_segments()).run(v, 5);
    done.store(true);
    feeder.join();
    EXPECT_EQ(v, want);
  });
}

}  // namespace
}  // namespace sfb::comm
