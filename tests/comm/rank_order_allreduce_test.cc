// The rank-order all-reduce (comm/rank_order_allreduce.h): the sums do not depend on how the
// buffer is cut into calls, so MG-WFBP's planners all give bitwise the same gradients.
#include "sfb/comm/rank_order_allreduce.h"

#include <random>

#include <gtest/gtest.h>

#include "sfb/core/error.h"
#include "sfb/core/rng.h"
#include "testing/rank_threads.h"

namespace sfb::comm {
namespace {

TEST(RankOrderAllreduce, SumsDoNotDependOnTheChunking) {
  const int P = 3;
  std::vector<std::vector<float>> whole(P), split(P);
  for (int r = 0; r < P; ++r) {
    Rng rng = make_rng(1, static_cast<uint64_t>(r));
    std::normal_distribution<float> g(0, 1e3f);
    for (int i = 0; i < 101; ++i) whole[static_cast<size_t>(r)].push_back(g(rng));
    split[static_cast<size_t>(r)] = whole[static_cast<size_t>(r)];
  }
  testing::run_ranks(P, [&](Transport& t) {
    RankOrderAllreduce ar(t);
    auto& w = whole[static_cast<size_t>(t.rank())];
    ar.run(w, 1);
    auto& s = split[static_cast<size_t>(t.rank())];
    ar.run(std::span<float>(s.data(), 37), 2);
    ar.run(std::span<float>(s.data() + 37, 64), 3);
  });
  for (int r = 0; r < P; ++r) EXPECT_EQ(whole[static_cast<size_t>(r)], split[0]);
}

TEST(RankOrderAllreduce, SumsAreInRankOrderOnEveryRank) {
  // Values whose float sum depends on the order: 1e8 + 1 - 1e8 is 0 in float, 1 - 1e8 + 1e8 is 0 too,
  // but (1e8 - 1e8) + 1 is 1. Rank order 0, 1, 2 gives (1e8 + -1e8) + 1 = 1 on every rank.
  const std::vector<float> by_rank = {1e8f, -1e8f, 1.0f};
  std::vector<std::vector<float>> out(3);
  testing::run_ranks(3, [&](Transport& t) {
    std::vector<float> v(5, by_rank[static_cast<size_t>(t.rank())]);
    RankOrderAllreduce(t).run(v, 7);
    out[static_cast<size_t>(t.rank())] = v;
  });
  for (const auto& v : out) EXPECT_EQ(v, std::vector<float>(5, 1.0f));
}

}  // namespace
}  // namespace sfb::comm
