#pragma once
// MG-WFBP training mode (job.mode = "mgwfbp"): data-parallel S-SGD of a CNN whose layer gradients
// are all-reduced while backward still runs, merged into groups by a planner (the paper's
// Algorithm 2). The executor is the training thread and composes three parts:
//
//  * GradientCommunicator (grad_comm.h): the communication thread; follows the plan group by
//    group while backward pushes each param layer's id the moment its gradient is final: a dense
//    group is all-reduced, a factor group (hybrid planners) all-gathers its fully connected
//    layers' sufficient factors and rebuilds their gradients (factor_grads.h).
//  * Replanner (replanner.h): profiles the first mgwfbp.profile_iters iterations (run as
//    SyncEASGD), fits the all-reduce cost model on the live transport, plans and broadcasts the
//    plan (plan_codec.h); re-plans on drift.
//  * RunLog (run_log.h): progress and metrics lines, the Chrome trace.
//
// Per iteration (Executor::Run in executor.cc): its own minibatch; the communicator set up for
// the plan and its link cost (its factor layers skip their own weight gradients); forward;
// backward; wait for every group; SGD with momentum and weight decay on the averaged gradients.
// Accounting per iteration: forward, backward, non-overlapped communication (after backward
// until the last group is done), iteration, bytes sent, and the simulator's prediction for the
// plan.
#include <functional>
#include <string>
#include <vector>

#include "sfb/cnn/cnn_file.h"
#include "sfb/cnn/grad_comm.h"
#include "sfb/cnn/run_log.h"
#include "sfb/comm/transport.h"
#include "sfb/core/config.h"
#include "sfb/core/memory.h"
#include "sfb/core/stop_reason.h"
#include "sfb/io/dataset.h"
#include "sfb/mgwfbp/planner.h"
#include "sfb/mgwfbp/simulator.h"

namespace sfb::cnn {

struct ExecutorHooks {
  // Rows of this rank's data for iteration `iter` (default: an epoch sampler per rank).
  std::function<void(int64_t iter, std::vector<int64_t>& rows)> batch;
  // Communication thread, just before group g's all-reduce (grad_comm.h).
  GradientCommunicator::OnAllreduce on_allreduce;
  // Forces a plan instead of profiling and planning (tests).
  const mgwfbp::Plan* plan = nullptr;
  // The dense groups' all-reduce engine (comm.collectives; default: sfb's rank-order all-reduce).
  comm::AllreduceFactory allreduce;
  // A stop signal on this rank (SIGINT/SIGTERM), or 0; polled every kStopCheckEvery iterations, when
  // the ranks agree whether any of them was signalled.
  std::function<int()> stop_signal;
};

// Where training starts (default: the seeded initial weights at iteration 0).
struct ExecutorStart {
  // --resume: parameters, momentum and iteration; the plan too when `ranks` is this job's (on
  // other ranks the resumed run profiles and plans again from its first iteration).
  const CnnFile* checkpoint = nullptr;
  // model.init: a model file's parameters, from iteration 0 with zero momentum.
  const CnnFile* init = nullptr;
};

// The ranks agree on a stop signal every this many iterations (one 8-byte all-gather).
inline constexpr int64_t kStopCheckEvery = 10;

struct ExecutorResult {
  std::vector<float> params;    // every parameter, param layers in forward order (cnn_file.h's order)
  std::vector<float> velocity;  // the momentum buffers, the same order
  NetworkSpec network;
  uint64_t checksum = 0;                            // of params
  int64_t start_iteration = 0;                      // resumed at (0: from the start)
  int64_t iterations_done = 0;                      // the iteration the weights are after
  StopReason stop_reason = StopReason::kMaxClocks;  // kMaxClocks (the iterations), kSignal or kDiverged
  mgwfbp::Plan plan;
  mgwfbp::CostModel cost;
  mgwfbp::Profile profile;
  std::vector<mgwfbp::Prediction> predictions;  // every planner, for the measured profile and cost
  std::vector<IterationStats> iterations;
  double test_accuracy = -1;  // rank 0
  double test_loss = -1;      // rank 0: mean cross-entropy on the test set
  double seconds = 0;
  int64_t bytes_sent = 0;
  int replans = 0;
  // The weights stopped being finite at this iteration (the same on every rank: the replicas are
  // identical); training stopped there. -1: they stayed finite.
  int64_t diverged_at = -1;
};

class Executor {
 public:
  // `local_rank`: this rank's index on its host (which GPU it takes under job.device = "cuda").
  Executor(const Config& cfg, comm::Transport& transport, const io::Dataset& train, const io::Dataset* test,
           ExecutorHooks hooks = {}, int local_rank = 0, ExecutorStart start = {});
  ExecutorResult run();

 private:
  class Run;  // one call of run(): its start, iterations and finish (executor.cc)
  const Config& cfg_;
  comm::Transport& t_;
  const io::Dataset& train_;
  const io::Dataset* test_;
  ExecutorHooks hooks_;
  int local_rank_;
  ExecutorStart start_;
};

// The network of cnn.layers on cnn.input, checked against the data (dense, D = input size, at
// least as many outputs as classes); throws InvalidArgument naming the keys.
Network make_network(const CnnConfig& cfg, const io::Dataset& train);
// What training `cfg`'s network on `train` allocates per rank: parameters with their gradients
// and momentum, activations and their gradients for a minibatch, the convolutions' im2col buffers.
MemoryEstimate cnn_memory(const Config& cfg, const io::Dataset& train);
// Whether every parameter of the network is finite.
bool params_finite(Network& net);
struct TestResult {
  double loss = -1, accuracy = -1;  // mean cross-entropy; fraction classified right (-1: no rows)
};
TestResult evaluate(Network& net, const io::Dataset& test);
// output.model: the trained weights of `r` as a model file (cnn_file.h).
CnnFile model_file(const Config& cfg, int ranks, const ExecutorResult& r);

}  // namespace sfb::cnn
