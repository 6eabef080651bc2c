#include "sfb/runtime/model_prox.h"

namespace sfb::runtime {

ModelProx model_prox(const Config& cfg, api::Model& model) {
  ModelProx p;
  if (has_scaling_prox(cfg, model))
    p.scale = [&cfg, &model](int64_t clock) { return model.prox_scale(clock_step(cfg, clock)); };
  if (model.has_prox()) p.prox = [&cfg, &model](MatrixMap W, int64_t clock) { model.prox(W, clock_step(cfg, clock)); };
  return p;
}

}  // namespace sfb::runtime
