// The re-planner: drift is judged against the backward time under the plan.
#include "sfb/cnn/replanner.h"

#include <gtest/gtest.h>

#include "testing/configs.h"
#include "testing/rank_threads.h"

namespace sfb::cnn {
namespace {

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
    Replanner rp(cfg.mgwfbp, t, net, 4);
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
