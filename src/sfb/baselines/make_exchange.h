#pragma once
// The Exchange of a baseline scheme (comm.scheme): null for "sfb", FmsExchange for "fms",
// AllreduceExchange for "allreduce".
#include <memory>

#include "sfb/comm/allreduce.h"
#include "sfb/core/config.h"
#include "sfb/runtime/exchange.h"

namespace sfb::baselines {

// `model_has_prox`: the model's Model::has_prox (FMS servers then answer whole clocks, and the
// workers push them so). `allreduce`: the engine of the "allreduce" scheme (comm.collectives;
// null: sfb's).
std::unique_ptr<runtime::Exchange> make_exchange(const Config& cfg, bool model_has_prox,
                                                 comm::AllreduceFactory allreduce = {});

}  // namespace sfb::baselines
