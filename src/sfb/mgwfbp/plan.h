#pragma once
// A merge plan of MG-WFBP: groups of consecutive layers, in the order they are communicated
// (backward order: the first group holds the last layers). The planners (planner.h) make plans and
// the simulator (simulator.h) times them: both include this header, the planners include the
// simulator (their costs are its group times), and the simulator includes no planner.
#include <string>
#include <vector>

#include "sfb/mgwfbp/profile.h"

namespace sfb::mgwfbp {

struct Group {
  int lo = 0;       // lowest layer index (forward order), the last one to be ready
  int hi = 0;       // highest layer index
  bool sf = false;  // sent as sufficient factors (all-gather) instead of a dense all-reduce
  bool operator==(const Group&) const = default;
};
using Plan = std::vector<Group>;

// Throws InternalError unless the plan covers layers L-1..0 once, in backward order.
void check_plan(const Plan& plan, int layers);
std::string describe(const Plan& plan);
// The same with the profile's layer names ("[fc2-conv3 | conv2-conv1]"; indices where a name is missing).
std::string describe(const Plan& plan, const Profile& profile);

}  // namespace sfb::mgwfbp
