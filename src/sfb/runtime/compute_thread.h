#pragma once
// The worker's SF-compute thread (worker.h): waits until its clock c is allowed (ClockGate), samples
// K rows (a function of seed, rank and clock), computes the clock's sufficient factors from W under
// SharedWeights' shared lock, and queues the committed batch for the communication thread and (under
// SFB) for the update thread, after the lock is released. Its state is the sampler and the batch
// buffers, locals of run().
#include "sfb/runtime/worker_state.h"

namespace sfb::runtime {

class ComputeThread {
 public:
  explicit ComputeThread(WorkerState& s) : s_(s) {}
  void run();

 private:
  WorkerState& s_;
};

}  // namespace sfb::runtime
