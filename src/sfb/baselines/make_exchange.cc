#include "sfb/baselines/make_exchange.h"

#include "sfb/baselines/allreduce_exchange.h"
#include "sfb/baselines/fms_exchange.h"
#include "sfb/core/error.h"

namespace sfb::baselines {

std::unique_ptr<runtime::Exchange> make_exchange(const Config& cfg, bool model_has_prox,
                                                 comm::AllreduceFactory allreduce) {
  switch (cfg.comm.scheme) {
    case Scheme::kSfb:
    case Scheme::kSharded: return nullptr;  // the sharded engine is no exchange (runtime/sharded_worker.h)
    case Scheme::kAllreduce: return std::make_unique<AllreduceExchange>(std::move(allreduce));
    case Scheme::kFms:
      return std::make_unique<FmsExchange>(static_cast<int>(cfg.fms.servers), cfg.sfb.staleness != 0, model_has_prox);
    case Scheme::kAuto: break;
  }
  throw InvalidArgument("comm.scheme = \"auto\" reached make_exchange unresolved (sfbd chooses the scheme first)");
}

}  // namespace sfb::baselines
