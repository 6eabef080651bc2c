#pragma once
// sfb-plan's memory: what each scheme's ranks hold at their peak at the target, by the estimate
// sfbd --check uses before it allocates anything (sfb/runtime/memory_estimate.h), and how many
// ranks a node of a given memory can hold. From the profile: the shape, the layout-free parts (W,
// the snapshot as eval.snapshot decides at the target's W, Halton's reconciliation block, the
// queues' batches, the workspaces, the baselines' row blocks, FMS's servers), the job's settings
// at their defaults for what the profile does not record (runtime.queue_capacity; BSP, as the
// predictions). Not counted: what the process holds before training (libraries, threads, its data
// partition), which sfbd --check measures on the machine that runs it.
#include <cstdint>
#include <string>

#include "sfb/predict/scheme_model.h"

namespace sfb_tools {

struct SchemeMemory {
  double rank0_bytes = 0;   // rank 0 (the monitor's snapshot and evaluation blocks: the largest)
  double rank_bytes = 0;    // any other worker
  double server_bytes = 0;  // an FMS server (0: none)
  // The node holding rank 0 with `ranks_per_node` workers on it (and, with FMS's servers beside the
  // workers, server 0; on hosts of their own, a server's node holds the server alone: the larger).
  double node_bytes = 0;
  int ranks_per_node = 1;
  // The most workers a node of `node_memory` bytes holds with rank 0 among them (and server 0 beside
  // them where the servers run there); -1 without a node memory; 0: not even one.
  int ranks_fit = -1;
};

// `ranks_per_node`: the workers sharing a node (Target: 1, or N for every rank on one host).
SchemeMemory scheme_memory(const sfb::predict::SchemeProfile& p, const sfb::predict::Scheme& s,
                           const sfb::predict::Target& t, double node_memory);

// "64GiB", "512MiB", "2TiB", "68719476736" (bytes), "64GB" (10^9): bytes; InvalidArgument naming
// `option` and the value otherwise.
double parse_memory(const std::string& value, const std::string& option);

}  // namespace sfb_tools
