#pragma once
// A model's proximal step for a rank that applies dense updates to W (or to a row shard of it)
// without running a worker: the FMS parameter servers (sfb/baselines/fms_server.h). It is the step
// the worker's update thread applies after each sender's batch (worker_update.cc), as plain
// callbacks so that the baselines need not see the model API.
//
// Threads: the callbacks call the model; use them from one thread.
#include <cstdint>
#include <functional>

#include "sfb/api/model.h"
#include "sfb/core/config.h"
#include "sfb/core/tensor.h"

namespace sfb::runtime {

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
