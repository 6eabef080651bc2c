// The plan broadcast's encoding: round trip, and malformed messages refused.
#include "sfb/cnn/replanner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"
#include "testing/configs.h"
#include "testing/rank_threads.h"

namespace sfb::cnn {
namespace {

TEST(PlanBroadcast, RoundTripsCostAndGroups) {
  const mgwfbp::Plan plan{{3, 4, true}, {1, 2}, {0, 0}};
  const mgwfbp::CostModel cost{275.5, 4.25e-3, 120.25, 1.5e-2};
  const Bytes b = encode_plan(plan, cost);
  EXPECT_EQ(b.size(), 32u + 3 * 24);
  mgwfbp::CostModel got;
  EXPECT_EQ(decode_plan(b, got, 5, {0, 0, 0, 1, 1}), plan);
  EXPECT_EQ(got.a_us, 275.5);
  EXPECT_EQ(got.b_us_per_byte, 4.25e-3);
  EXPECT_EQ(got.ag_a_us, 120.25);
  EXPECT_EQ(got.ag_b_us_per_byte, 1.5e-2);
}

TEST(PlanBroadcast, AFactorGroupNeedsFactorsInEveryLayer) {
  mgwfbp::CostModel c;
  const Bytes b = encode_plan({{2, 4, true}, {0, 1}}, {1, 2});
  EXPECT_THAT(
      [&] {
        decode_plan(b, c, 5, {0, 0, 0, 1, 1});
      },
      ::testing::ThrowsMessage<CommError>(::testing::HasSubstr("layer 2 has none")));
  EXPECT_THROW(decode_plan(b, c, 5), CommError) << "no layer has factors";
  EXPECT_EQ(decode_plan(b, c, 5, {0, 0, 1, 1, 1}).front().sf, true);
}

TEST(PlanBroadcast, MalformedPlansAreRefused) {
  mgwfbp::CostModel c;
  const Bytes good = encode_plan({{1, 2}, {0, 0}}, {1, 2});
  EXPECT_THAT([&] { decode_plan(std::span(good).first(40), c, 3); },
              ::testing::ThrowsMessage<CommError>(::testing::HasSubstr("plan broadcast of 40 bytes")));
  EXPECT_THROW(decode_plan(good, c, 2), CommError) << "group [1, 2] outside 2 layers";
  EXPECT_THROW(decode_plan(encode_plan({{1, 2}}, {1, 2}), c, 3), CommError) << "layer 0 in no group";
}

// Drift is measured against the backward time under the plan, not the profile's: a hybrid plan's
// factor layers skip their weight gradients, so its backward is shorter by design and must not
// trigger re-planning; a later change of that time must.
TEST(Replanner, DriftIsMeasuredAgainstTheBackwardTimeUnderThePlan) {
  Config cfg = testing::quiet_cnn("fc:8,relu,fc:3", 4, 200);
  cfg.mgwfbp.profile_iters = 2;
  cfg.mgwfbp.replan_threshold = 0.2;
  cfg.mgwfbp.replan_every = 10;
  testing::run_ranks(1, [&](comm::Transport& t) {
    Network net(cfg.cnn.layers, Shape{1, 2, 2});
    GradientCommunicator comm(t, net);
    Replanner rp(cfg.mgwfbp, t, net, comm, 4);
    const std::vector<double> layer_us(static_cast<size_t>(net.layers()), 300.0);
    int64_t it = 0;
    auto run = [&](int64_t iters, double backward_us) {
      for (int64_t end = it + iters; it < end; ++it) {
        rp.before_iteration(it);
        rp.record(it, 100, layer_us, backward_us);
      }
    };
    run(2, 900);    // profiling: the profile's backward is 900 us
    run(100, 450);  // half of it under the plan: no drift
    EXPECT_EQ(rp.replans(), 0);
    run(100, 700);  // 56% more than under the plan
    EXPECT_GE(rp.replans(), 1);
  });
}

}  // namespace
}  // namespace sfb::cnn
