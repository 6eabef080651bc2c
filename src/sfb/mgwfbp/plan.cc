#include "sfb/mgwfbp/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/error.h"

namespace sfb::mgwfbp {

void check_plan(const Plan& plan, int layers) {
  int next = layers - 1;
  for (const auto& g : plan) {
    SFB_ENFORCE(g.hi == next && g.lo <= g.hi && g.lo >= 0, "plan {} does not cover layers {}..0 in backward order",
                describe(plan), layers - 1);
    next = g.lo - 1;
  }
  SFB_ENFORCE(next == -1, "plan {} stops at layer {}", describe(plan), next + 1);
}

std::string describe(const Plan& plan) {
  std::vector<std::string> parts;
  for (const auto& g : plan)
    parts.push_back((g.sf ? "sf:" : "") + (g.lo == g.hi ? std::to_string(g.lo) : fmt::format("{}-{}", g.hi, g.lo)));
  return fmt::format("[{}]", fmt::join(parts, " | "));
}

std::string describe(const Plan& plan, const Profile& profile) {
  const auto name = [&](int l) {
    return l >= 0 && l < profile.size() && !profile.layers[static_cast<size_t>(l)].name.empty()
               ? profile.layers[static_cast<size_t>(l)].name
               : std::to_string(l);
  };
  std::vector<std::string> parts;
  for (const auto& g : plan)
    parts.push_back((g.sf ? "sf:" : "") + (g.lo == g.hi ? name(g.lo) : fmt::format("{}-{}", name(g.hi), name(g.lo))));
  return fmt::format("[{}]", fmt::join(parts, " | "));
}

}  // namespace sfb::mgwfbp
