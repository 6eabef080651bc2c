#pragma once
// The plan message (docs/formats.md, "CNN plan broadcast"): rank 0's broadcast of the plan and its
// cost model (replanner.h), and the plan a checkpoint stores (cnn_file.h), are the same bytes:
// f64 a_us, f64 b_us_per_byte, f64 ag_a_us, f64 ag_b_us_per_byte, then per group i64 lo, i64 hi,
// i64 transport (0 dense, 1 factors).
//
// A plan fits a network when its groups cover the param layers once, in backward order, and its
// factor groups hold only layers with sufficient factors (Network::has_factors). decode_plan checks
// that as it reads; check_plan_fits checks a plan already in memory (a resumed run's), once.
#include <span>
#include <string>
#include <vector>

#include "sfb/cnn/network.h"
#include "sfb/core/bytes.h"
#include "sfb/mgwfbp/cost_model.h"
#include "sfb/mgwfbp/plan.h"

namespace sfb::cnn {

Bytes encode_plan(const mgwfbp::Plan& plan, const mgwfbp::CostModel& cost);
// Throws CommError for a malformed message and for a plan that does not fit `layers` param layers
// of which those with has_factors[p] have factors (empty: none has).
mgwfbp::Plan decode_plan(std::span<const std::byte> bytes, mgwfbp::CostModel& cost, int layers,
                         const std::vector<char>& has_factors = {});

// Network::has_factors of every param layer, in order: what decode_plan checks a plan against.
std::vector<char> factor_layers(const Network& net);
// Throws DataError naming `what` (where the plan comes from) unless `plan` fits `net`.
void check_plan_fits(const mgwfbp::Plan& plan, const Network& net, const std::string& what);

}  // namespace sfb::cnn
