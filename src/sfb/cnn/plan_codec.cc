#include "sfb/cnn/plan_codec.h"

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::cnn {
namespace {

// Why the group [lo, hi] sent by `transport` (0 dense, 1 factors) cannot be part of a plan for
// `layers` param layers of which those with has_factors[p] have factors; "" when it can.
std::string group_misfit(int64_t lo, int64_t hi, int64_t transport, int layers, const std::vector<char>& has_factors) {
  if (lo < 0 || hi < lo || hi >= layers)
    return fmt::format("group [{}, {}] outside the {} param layers", lo, hi, layers);
  if (transport != 0 && transport != 1)
    return fmt::format("group [{}, {}] has transport {} (0 dense, 1 factors)", lo, hi, transport);
  for (int64_t p = lo; transport == 1 && p <= hi; ++p)
    if (static_cast<size_t>(p) >= has_factors.size() || !has_factors[static_cast<size_t>(p)])
      return fmt::format("group [{}, {}] goes as sufficient factors but layer {} has none", lo, hi, p);
  return {};
}

// Why `plan` does not cover `layers` param layers once, in backward order; "" when it does.
std::string partition_misfit(const mgwfbp::Plan& plan, int layers) {
  try {
    mgwfbp::check_plan(plan, layers);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

Bytes encode_plan(const mgwfbp::Plan& plan, const mgwfbp::CostModel& cost) {
  ByteWriter w(32 + plan.size() * 24);
  w.put<double>(cost.a_us);
  w.put<double>(cost.b_us_per_byte);
  w.put<double>(cost.ag_a_us);
  w.put<double>(cost.ag_b_us_per_byte);
  for (const auto& g : plan) {
    w.put<int64_t>(g.lo);
    w.put<int64_t>(g.hi);
    w.put<int64_t>(g.sf ? 1 : 0);
  }
  return w.take();
}

mgwfbp::Plan decode_plan(std::span<const std::byte> bytes, mgwfbp::CostModel& cost, int layers,
                         const std::vector<char>& has_factors) {
  if (bytes.size() < 32 || (bytes.size() - 32) % 24 != 0)
    throw CommError(fmt::format("plan broadcast of {} bytes", bytes.size()));
  ByteReader r(bytes, "plan broadcast", ByteReader::Source::kMessage);
  cost.a_us = r.get<double>("a_us");
  cost.b_us_per_byte = r.get<double>("b_us_per_byte");
  cost.ag_a_us = r.get<double>("ag_a_us");
  cost.ag_b_us_per_byte = r.get<double>("ag_b_us_per_byte");
  mgwfbp::Plan plan;
  while (r.remaining() > 0) {
    const auto lo = r.get<int64_t>("lo"), hi = r.get<int64_t>("hi"), sf = r.get<int64_t>("transport");
    if (const std::string why = group_misfit(lo, hi, sf, layers, has_factors); !why.empty())
      throw CommError("plan broadcast: " + why);
    plan.push_back({static_cast<int>(lo), static_cast<int>(hi), sf == 1});
  }
  if (const std::string why = partition_misfit(plan, layers); !why.empty()) throw CommError("plan broadcast: " + why);
  return plan;
}

std::vector<char> factor_layers(const Network& net) {
  std::vector<char> has;
  for (int p = 0; p < net.param_layers(); ++p) has.push_back(net.has_factors(p) ? 1 : 0);
  return has;
}

void check_plan_fits(const mgwfbp::Plan& plan, const Network& net, const std::string& what) {
  const std::vector<char> has_factors = factor_layers(net);
  for (const auto& g : plan) {
    const std::string why = group_misfit(g.lo, g.hi, g.sf ? 1 : 0, net.param_layers(), has_factors);
    SFB_CHECK_DATA(why.empty(), "{}: {}", what, why);
  }
  const std::string why = partition_misfit(plan, net.param_layers());
  SFB_CHECK_DATA(why.empty(), "{}: {}", what, why);
}

}  // namespace sfb::cnn
