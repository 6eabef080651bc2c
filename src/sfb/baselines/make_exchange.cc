#include "sfb/baselines/make_exchange.h"

#include "sfb/baselines/allreduce_exchange.h"
#include "sfb/baselines/fms_exchange.h"
#include "sfb/core/error.h"

namespace sfb::baselines {

std::unique_ptr<runtime::Exchange> make_exchange(const Config& cfg, bool model_has_prox,
                                                 comm::AllreduceFactory allreduce) {
  if (cfg.comm.scheme == "sfb") return nullptr;
  if (cfg.comm.scheme == "allreduce") return std::make_unique<AllreduceExchange>(std::move(allreduce));
  if (cfg.comm.scheme == "fms")
    return std::make_unique<FmsExchange>(static_cast<int>(cfg.fms.servers), cfg.sfb.staleness != 0, model_has_prox);
  throw InvalidArgument(fmt::format("comm.scheme: unknown scheme \"{}\"", cfg.comm.scheme));
}

}  // namespace sfb::baselines
