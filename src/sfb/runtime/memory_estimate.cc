#include "sfb/runtime/memory_estimate.h"

#include <algorithm>

#include <fmt/format.h>

namespace sfb::runtime {

MemoryEstimate worker_memory(const Config& cfg, int workers, int rank, int64_t J, int64_t D, double v_floats) {
  MemoryEstimate e;
  const double w = 4.0 * static_cast<double>(J) * static_cast<double>(D);
  const double P = workers, K = static_cast<double>(cfg.optimizer.minibatch);
  const std::string shape = cfg.model.plugin.empty() ? "the model's shape (data.features, data.classes, model.*)"
                                                     : "the plugin's rows() x cols()";
  // W, the materialised copy for the checksum, and on rank 0 the monitor's snapshots (its queue
  // of 4, the one it evaluates, the one being handed over).
  const int copies = rank == 0 ? 8 : 2;
  e.add(fmt::format("W ({} x {}) and {} copies of it", J, D, copies - 1), shape, copies * w);
  // Batches in flight per source: the clocks the consistency model lets run ahead, at most the
  // queue capacity; for every source (in-queue) and this rank's out-queue.
  const int64_t ahead = cfg.sfb.asp() ? cfg.runtime.asp_window : cfg.sfb.staleness;
  const double per_source = static_cast<double>(std::min<int64_t>(cfg.runtime.queue_capacity, ahead + 2));
  const double batch = 4.0 * K * (static_cast<double>(J) + 2.0 * v_floats);
  e.add("SF batches in the queues", "optimizer.minibatch, sfb.staleness, runtime.queue_capacity",
        batch * per_source * (P + 1));
  e.add("the update kernel's workspace", "optimizer.minibatch and the model's shape",
        4.0 * P * K * (static_cast<double>(J) + v_floats) * 2);
  e.add("the minibatch", "optimizer.minibatch", 8.0 * K * v_floats);
  if (cfg.comm.scheme != "sfb")
    e.add(fmt::format("the {} exchange's dense updates", cfg.comm.scheme), "comm.scheme and the model's shape",
          w * (per_source + 2));
  return e;
}

}  // namespace sfb::runtime
