// The ring all-reduce (comm/ring_allreduce.h): sums over 1..7 ranks and every rank ends with the
// same bits, for buffers shorter than, equal to and longer than the rank count.
#include "sfb/comm/ring_allreduce.h"

#include <random>

#include <gtest/gtest.h>

#include "sfb/core/rng.h"
#include "testing/rank_threads.h"

namespace sfb::comm {
namespace {

class RingSizes : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(RingSizes, AllreduceSumsAndEveryRankGetsTheSameBits) {
  const int P = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  std::vector<std::vector<float>> data(static_cast<size_t>(P));
  std::vector<double> expect(static_cast<size_t>(n), 0.0);
  for (int r = 0; r < P; ++r) {
    Rng rng = make_rng(9, static_cast<uint64_t>(r));
    std::uniform_real_distribution<float> u(-1, 1);
    for (int i = 0; i < n; ++i) {
      data[static_cast<size_t>(r)].push_back(u(rng));
      expect[static_cast<size_t>(i)] += data[static_cast<size_t>(r)].back();
    }
  }
  testing::run_ranks(P, [&](Transport& t) {
    auto& mine = data[static_cast<size_t>(t.rank())];
    ring_allreduce(t, P, mine, 7, [&t] { return t.recv(kTagReduce); });
  });
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(data[0][static_cast<size_t>(i)], expect[static_cast<size_t>(i)], 1e-5);
    for (int r = 1; r < P; ++r)
      EXPECT_EQ(data[static_cast<size_t>(r)][static_cast<size_t>(i)], data[0][static_cast<size_t>(i)]);
  }
}

INSTANTIATE_TEST_SUITE_P(RanksAndSizes, RingSizes,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 7), ::testing::Values(0, 1, 5, 1000)));

TEST(RingAllreduce, AChunkFromTheWrongStepIsRejected) {
  EXPECT_THROW(testing::run_ranks(2,
                                  [&](Transport& t) {
                                    std::vector<float> v(4, 1.0f);
                                    // Rank 1 labels its chunks with another id: rank 0 must refuse them, not add them.
                                    ring_allreduce(t, 2, v, t.rank() == 0 ? 1 : 2, [&t] { return t.recv(kTagReduce); });
                                  }),
               CommError);
}

}  // namespace
}  // namespace sfb::comm
