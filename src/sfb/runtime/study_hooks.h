#pragma once
// Worker hooks for studies and tests that need a rank to behave differently (runtime.slow_rank,
// runtime.slow_ms: one rank sleeps after every clock, for staleness studies). They act through
// WorkerHooks, outside the production compute loop.
#include "sfb/core/config.h"
#include "sfb/runtime/worker.h"

namespace sfb::runtime {

// `hooks` plus what runtime.slow_rank / slow_ms ask of rank `rank` (nothing for other ranks).
WorkerHooks with_study_hooks(const RuntimeConfig& cfg, int rank, WorkerHooks hooks = {});

}  // namespace sfb::runtime
