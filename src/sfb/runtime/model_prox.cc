#include "sfb/runtime/model_prox.h"

namespace sfb::runtime {

ModelProx model_prox(const Config& cfg, api::Model& model) {
  // The step of a clock as the worker computes it (Worker::State::step: rounded to float).
  const auto step = [&cfg](int64_t clock) {
    return static_cast<double>(static_cast<float>(cfg.optimizer.step(clock)));
  };
  ModelProx p;
  // The worker's probe (worker.cc): a model whose prox_scale is 1 at the first step has no scaling prox.
  if (model.prox_scale(step(0)) != 1.0)
    p.scale = [&model, step](int64_t clock) { return model.prox_scale(step(clock)); };
  if (model.has_prox()) p.prox = [&model, step](MatrixMap W, int64_t clock) { model.prox(W, step(clock)); };
  return p;
}

}  // namespace sfb::runtime
