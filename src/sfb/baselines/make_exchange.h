#pragma once
// The Exchange of a baseline scheme (comm.scheme): null for "sfb", FmsExchange for "fms",
// AllreduceExchange for "allreduce".
#include <memory>

#include "sfb/core/config.h"
#include "sfb/runtime/exchange.h"

namespace sfb::baselines {

std::unique_ptr<runtime::Exchange> make_exchange(const Config& cfg);

}  // namespace sfb::baselines
