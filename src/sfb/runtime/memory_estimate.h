#pragma once
// What one worker allocates for a config, before it allocates it (core/memory.h): W and rank 0's
// snapshots of it, the SF batches the queues may hold, the update kernel's workspace, a baseline's
// dense updates. The queues are counted at what the consistency model lets them hold (a few clocks
// per source under BSP and SSP, the flow-control window under ASP), not at their capacity.
#include <cstdint>

#include "sfb/core/config.h"
#include "sfb/core/memory.h"

namespace sfb::runtime {

// `v_floats`: the floats of one sample's v (D when dense, its average non-zeros when sparse).
MemoryEstimate worker_memory(const Config& cfg, int workers, int rank, int64_t J, int64_t D, double v_floats);

}  // namespace sfb::runtime
