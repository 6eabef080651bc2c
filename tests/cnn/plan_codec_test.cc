// The plan message (the broadcast and a checkpoint's plan): round trip, malformed messages
// refused, and a plan in memory checked against a network.
#include "sfb/cnn/plan_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"

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

// A restored plan is checked against the network it is to run on: a partition of its param
// layers, factor groups only on fully connected layers.
TEST(PlanFits, ChecksAPlanInMemoryAgainstTheNetwork) {
  Network net("conv:2:3,relu,fc:4,relu,fc:3", Shape{1, 4, 4});  // param layers conv1, fc1, fc2
  EXPECT_EQ(factor_layers(net), (std::vector<char>{0, 1, 1}));
  EXPECT_NO_THROW(check_plan_fits({{1, 2, true}, {0, 0}}, net, "the plan"));
  EXPECT_THAT(
      [&] {
        check_plan_fits({{0, 2, true}}, net, "the plan");
      },
      ::testing::ThrowsMessage<DataError>(::testing::HasSubstr("the plan: group [0, 2] goes as sufficient "
                                                               "factors but layer 0 has none")));
  EXPECT_THROW(check_plan_fits({{1, 2}}, net, "the plan"), DataError) << "layer 0 in no group";
  EXPECT_THROW(check_plan_fits({{1, 3}, {0, 0}}, net, "the plan"), DataError) << "layer 3 does not exist";
}

}  // namespace
}  // namespace sfb::cnn
