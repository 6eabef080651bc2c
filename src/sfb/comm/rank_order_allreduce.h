#pragma once
// A sum all-reduce whose result does not depend on how the data is cut into messages: each rank
// owns a chunk, receives that chunk from every rank and adds the P contributions in rank order
// 0, 1, ..., P-1, then the owners send the sums to everyone (reduce-scatter by direct exchange,
// then all-gather). Bytes per rank are those of a ring, 2 (P-1)/P of the buffer. MG-WFBP merges
// layers into different messages under different planners; with this all-reduce every planner
// still produces bitwise the same gradients (docs/design.md, invariant 6). Messages on kTagReduce,
// allreduce_chunks.h (step 0: a contribution to the owner, 1: the owner's sum).
//
// Threads: the caller must be the only thread receiving on `t` while it runs.
#include <span>
#include <vector>

#include "sfb/comm/source_stash.h"
#include "sfb/comm/transport.h"

namespace sfb::comm {

class RankOrderAllreduce {
 public:
  explicit RankOrderAllreduce(Transport& t) : t_(t), stash_(t, kTagReduce) {}
  // Sums `data` over all ranks of the transport in place; `id` labels the messages (checked).
  void run(std::span<float> data, int64_t id);

 private:
  Transport& t_;
  SourceStash stash_;  // messages of later calls, per source
};

}  // namespace sfb::comm
