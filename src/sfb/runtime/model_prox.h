#pragma once
// A model's proximal step for a rank that applies dense updates to W (or to a row shard of it)
// without running a worker: the FMS parameter servers (sfb/baselines/fms_server.h). It is the step
// the worker's update thread applies after each sender's batch (update_thread.cc), as plain
// callbacks so that the baselines need not see the model API.
//
// Threads: the callbacks call the model; use them from one thread.
#include <cstdint>
#include <functional>

#include "sfb/api/model.h"
#include "sfb/core/config.h"
#include "sfb/core/tensor.h"

namespace sfb::runtime {

// The step size of `clock` as the runtime applies it: optimizer.lr with its decay, rounded to
// float (the SF writer scales u by it; the proximal steps get the same value).
inline float clock_step(const Config& cfg, int64_t clock) { return static_cast<float>(cfg.optimizer.step(clock)); }

// Whether `model` has a scaling prox (Model::prox_scale): probed at the first step, where a model
// without one returns 1.
inline bool has_scaling_prox(const Config& cfg, const api::Model& model) {
  return model.prox_scale(clock_step(cfg, 0)) != 1.0;
}

struct ModelProx {
  // W <- c W after each worker's batch of `clock` (row-separable: apply it to any shard); empty when
  // the model's prox_scale is 1.
  std::function<double(int64_t clock)> scale;
  // The general proximal step on the whole W after each worker's batch of `clock`; empty when the
  // model has none (Model::has_prox). It may couple rows (sparse coding's column projection), so a
  // sharded holder must gather W first.
  std::function<void(MatrixMap W, int64_t clock)> prox;
  bool any() const { return scale || prox; }
};

// The callbacks keep references to `cfg` and `model`.
ModelProx model_prox(const Config& cfg, api::Model& model);

}  // namespace sfb::runtime
