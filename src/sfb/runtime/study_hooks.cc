#include "sfb/runtime/study_hooks.h"

#include <chrono>
#include <thread>

namespace sfb::runtime {

WorkerHooks with_study_hooks(const RuntimeConfig& cfg, int rank, WorkerHooks hooks) {
  if (rank != cfg.slow_rank || cfg.slow_ms <= 0) return hooks;
  const auto pause = std::chrono::microseconds(static_cast<int64_t>(cfg.slow_ms * 1000));
  hooks.on_clock_committed = [pause, next = std::move(hooks.on_clock_committed)](int64_t clock) {
    if (next) next(clock);
    std::this_thread::sleep_for(pause);
  };
  return hooks;
}

}  // namespace sfb::runtime
