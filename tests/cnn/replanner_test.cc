// The plan broadcast's encoding: round trip, and malformed messages refused.
#include "sfb/cnn/replanner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"

namespace sfb::cnn {
namespace {

TEST(PlanBroadcast, RoundTripsCostAndGroups) {
  const mgwfbp::Plan plan{{3, 4}, {1, 2}, {0, 0}};
  const mgwfbp::CostModel cost{275.5, 4.25e-3};
  const Bytes b = encode_plan(plan, cost);
  EXPECT_EQ(b.size(), 16u + 3 * 16);
  mgwfbp::CostModel got;
  EXPECT_EQ(decode_plan(b, got, 5), plan);
  EXPECT_EQ(got.a_us, 275.5);
  EXPECT_EQ(got.b_us_per_byte, 4.25e-3);
}

TEST(PlanBroadcast, MalformedPlansAreRefused) {
  mgwfbp::CostModel c;
  const Bytes good = encode_plan({{1, 2}, {0, 0}}, {1, 2});
  EXPECT_THAT([&] { decode_plan(std::span(good).first(20), c, 3); },
              ::testing::ThrowsMessage<CommError>(::testing::HasSubstr("plan broadcast of 20 bytes")));
  EXPECT_THROW(decode_plan(good, c, 2), CommError) << "group [1, 2] outside 2 layers";
  EXPECT_THROW(decode_plan(encode_plan({{1, 2}}, {1, 2}), c, 3), CommError) << "layer 0 in no group";
}

}  // namespace
}  // namespace sfb::cnn
