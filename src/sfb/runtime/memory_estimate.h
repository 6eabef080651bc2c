#pragma once
// What one rank's process will hold at its peak, before it allocates it (core/memory.h): what the
// process holds now (libraries, threads, its data partition, on rank 0 the objective's sample and
// the test set: measured), W once, on rank 0 the monitor's snapshot when eval.snapshot copies, the
// reconciliation's previous consensus under sfb.reconcile = "sum", the SF batches the queues may
// hold (counted at what the consistency model lets them hold: a few clocks per source under BSP
// and SSP, the flow-control window under ASP), the update kernel's and the model's workspace, and a
// baseline's bounded row blocks. docs/design.md ("Memory") explains each part; summary.json puts the
// measured peak RSS of every rank beside it.
#include <cstdint>

#include "sfb/core/config.h"
#include "sfb/core/memory.h"

namespace sfb::runtime {

// A worker. `v_floats`: the floats of one sample's v (D when dense, its average non-zeros when
// sparse); `general_prox`: the model has a proximal step that is not a scaling (FMS then moves whole
// clocks); `process_bytes`: what the process holds now (current_rss_bytes()).
MemoryEstimate worker_memory(const Config& cfg, int workers, int rank, int64_t J, int64_t D, double v_floats,
                             bool general_prox, double process_bytes);
// A rank of comm.scheme = "sharded" (sharded_worker.h): its block of W's rows, a clock's P K
// samples (received and decoded), their outputs on the block, the evaluation samples (every rank
// holds the objective's sample and the test set as the model's samples: `eval_rows` rows) and the
// file streaming's blocks. Nothing is W-sized.
MemoryEstimate sharded_memory(const Config& cfg, int workers, int rank, int64_t J, int64_t D, double v_floats,
                              int64_t eval_rows, double process_bytes);
// A training rank under cfg.comm.scheme: sharded_memory for "sharded" (with `eval_rows`),
// worker_memory for every scheme that holds a replica. sfbd and sfb-plan both ask this.
MemoryEstimate training_memory(const Config& cfg, int workers, int rank, int64_t J, int64_t D, double v_floats,
                               bool general_prox, int64_t eval_rows, double process_bytes);
// An FMS parameter server (comm.scheme = "fms", the ranks after the workers): its shard of W and the
// blocks it holds; a model with a general prox (`whole_w`) makes it assemble the whole W.
MemoryEstimate server_memory(const Config& cfg, int workers, int64_t J, int64_t D, bool whole_w, double process_bytes);

}  // namespace sfb::runtime
