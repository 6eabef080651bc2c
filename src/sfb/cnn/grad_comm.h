#pragma once
// The gradient-communication thread of the CNN executor (MG-WFBP's Algorithm 2). Per iteration
// it follows the plan group by group, in backward order: it waits until the group's last-ready
// layer has reported its gradient (ready()), then sends the group by its transport:
//  * dense: copies the group's gradients into one flat buffer, all-reduces it (comm/allreduce.h:
//    sfb's rank-order all-reduce gives bitwise the same sums under every planner; or Open MPI's),
//    divides by P and copies back;
//  * sufficient factors (g.sf, fully connected layers only): all-gathers every layer's factors
//    (one message per rank, comm/sf_allgather.h) and rebuilds each layer's averaged weight and
//    bias gradients from all ranks' factors in rank order (factor_grads.h);
// and records when each group started and ended and the bytes it sent.
//
// Threads: begin(), ready(), wait() and group_records() are called by the training thread; the
// communication thread touches a param layer's gradients only between its ready() and wait(),
// and is the only one to run the all-reduce engine (the plan's link cost included).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "sfb/cnn/factor_grads.h"
#include "sfb/cnn/network.h"
#include "sfb/comm/allreduce.h"
#include "sfb/comm/channel.h"
#include "sfb/comm/sf_allgather.h"
#include "sfb/core/bounded_queue.h"
#include "sfb/core/thread_group.h"
#include "sfb/mgwfbp/planner.h"

namespace sfb::cnn {

using SteadyClock = std::chrono::steady_clock;
inline double us_since(SteadyClock::time_point t0, SteadyClock::time_point t) {
  return std::chrono::duration<double, std::micro>(t - t0).count();
}

// One group's communication in one iteration.
struct GroupRecord {
  double start_us = 0, end_us = 0;  // since the iteration began
  int64_t bytes_sent = 0;           // by this rank
  bool sf = false;                  // sent as sufficient factors
};

class GradientCommunicator {
 public:
  // Called on the communication thread just before group g's all-reduce; ready[p] says whether
  // param layer p has reported its gradient in this iteration (tests).
  using OnAllreduce =
      std::function<void(int64_t iter, int group, const mgwfbp::Group& g, const std::vector<char>& ready)>;

  // `allreduce`: the dense groups' all-reduce engine over this channel's ranks (default: sfb's
  // rank-order all-reduce on kTagReduce).
  GradientCommunicator(comm::Transport& t, Network& net, OnAllreduce hook = {}, comm::AllreduceFactory allreduce = {});
  ~GradientCommunicator();  // stops the thread

  // Serve iteration `iter` with `plan` and `cost`, the link cost the dense groups' all-reduce
  // chooses its algorithm by (the plan's broadcast fit, the same on every rank; both copied: the
  // training thread may re-plan between iterations); returns the time the iteration started.
  // Before forward: the plan is the one owner of which layers go as sufficient factors, and
  // begin() sets them on the network (Network::set_factor_layers), which tells its layers and
  // backend.
  SteadyClock::time_point begin(int64_t iter, const mgwfbp::Plan& plan, const comm::LinkCost& cost);
  // Param layer p's gradient is final (called from backward).
  void ready(int p) { ready_q_.push(p); }
  // Waits until every group of the iteration is all-reduced; rethrows the thread's error.
  void wait();
  // Each group's times and bytes; valid after wait().
  std::vector<GroupRecord> group_records() const;

 private:
  void loop();
  void serve(int64_t iter, const mgwfbp::Plan& plan, std::vector<char>& ready, std::vector<float>& buf);
  void allreduce_group(const mgwfbp::Group& g, int64_t id, std::vector<float>& buf);
  void allgather_group(const mgwfbp::Group& g, int64_t id);

  comm::Transport& t_;
  Network& net_;
  OnAllreduce hook_;
  comm::TransportChannel reduce_ch_, sf_ch_;
  std::unique_ptr<comm::Allreduce> allreduce_;
  comm::SfAllgather allgather_;
  RebuildScratch scratch_;
  BoundedQueue<int> ready_q_;  // param layer ids; -1 stops the thread
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t iter_ = -1;  // the iteration to serve
  bool stop_ = false;
  mgwfbp::Plan plan_;
  comm::LinkCost cost_;
  int groups_done_ = 0;
  SteadyClock::time_point iter_start_;
  std::vector<GroupRecord> group_records_;
  ThreadGroup thread_;  // last: stops the thread before the members it uses go
};

}  // namespace sfb::cnn
