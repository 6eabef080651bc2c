#pragma once
// Reconciliation of the replicas under partial broadcast (sfb.broadcast = "halton" or
// "halton-static", BSP). Each worker's batch reaches Q of the P - 1 peers per clock, so replica q
// holds W_0 plus its own and its in-neighbours' updates only. When the partitions are alike the
// updates a replica misses resemble the ones it gets; when they differ (a file sorted by label,
// data.partition = "contiguous") they are lost to it for good and each replica drifts toward its
// own data (replica drift above 1 measured: the replicas further from their mean than the mean
// from zero). Every `every` clocks the workers all-reduce W and agree on one consensus:
//  * kMean (the default): W = M, the replicas' mean (model averaging, local SGD). Safe under any
//    prox (a mean of feasible points is feasible); each update counts (Q + 1) / P, as in plain
//    partial broadcast's consensus.
//  * kSum: W = B + P / (Q + 1) (M - B), with M
//    the replicas' mean and B the consensus of the previous reconciliation. Every update reached
//    exactly Q + 1 replicas, so M - B holds each of them (Q + 1) / P times and the consensus holds
//    each exactly once: what full broadcast would have applied, from gradients up to `every`
//    clocks stale (exact for linear updates; to first order under an L2 shrinkage). Measured on
//    Fashion-MNIST, P = 8: as good as full broadcast at every = 1 or 2, unstable at 4 (the amplified
//    sum of gradients taken on drifted replicas): docs/compare.md.
// Between reconciliations the replicas move as before. The all-reduce runs in row blocks of at most
// 16 MiB, each replaced by its consensus before the next: memory is W plus one block (kSum also
// keeps B, one more W). The exact drift just before each
// reconciliation, sqrt(mean_q ||W_q - M||^2) / ||M||, comes for one more all-reduce of one float.
// Threads: the update thread calls reconcile() with W held exclusively; the all-reduce takes its
// messages from `channel` (kTagReconcile, fed by the communication thread).
#include <cstdint>
#include <memory>
#include <string>

#include "sfb/comm/allreduce.h"
#include "sfb/comm/channel.h"
#include "sfb/core/collective_cost.h"
#include "sfb/core/tensor.h"

namespace sfb::runtime {

class Reconciler {
 public:
  enum class Mode { kSum, kMean };
  // `replicas_per_update`: Q + 1, the replicas each update reaches; `base`: the W every replica
  // starts from (identical on every worker).
  // starts at `start_clock`.
  Reconciler(comm::Channel& channel, int workers, int replicas_per_update, Mode mode, int64_t every,
             int64_t start_clock, const Matrix& base);

  int64_t every() const { return every_; }
  Mode mode() const { return mode_; }
  static const char* mode_name(Mode m) { return m == Mode::kSum ? "sum" : "mean"; }
  // Whether the boundary before clock `clock` (clocks < clock applied) is a reconciliation point.
  bool due(int64_t clock) const { return every_ > 0 && clock % every_ == 0 && clock > last_; }
  // The first clock a compute thread may not start before the reconciliation at it is done.
  int64_t next_boundary() const { return next_point(last_, every_); }
  // The first reconciliation point after clock `last` at period `every` (none when every is 0).
  static int64_t next_point(int64_t last, int64_t every) { return every > 0 ? (last / every + 1) * every : INT64_MAX; }
  int64_t last() const { return last_; }

  // Replaces the true parameters W (every worker's, scale folded in) by the consensus at `clock`;
  // returns the drift just before. Throws CommError (a peer lost or timed out) or
  // QueueChannel::Closed (the job is aborting).
  double reconcile(Matrix& W, int64_t clock);

  struct Stats {
    int64_t count = 0;
    double seconds = 0;
    double max_drift = 0;   // before a reconciliation
    double last_drift = 0;  // before the last one
  };
  const Stats& stats() const { return stats_; }

 private:
  std::unique_ptr<comm::RankOrderAllreduce> allreduce_;
  const int workers_;
  const double gain_;  // kSum: P / (Q + 1)
  const Mode mode_;
  const int64_t every_;
  Matrix base_;  // kSum: the last consensus (the one W-sized copy the algorithm needs)
  Matrix mean_;  // one row block of the mean, reused
  int64_t last_ = 0;
  int64_t calls_ = 0;
  Stats stats_;
};

// sfb.reconcile_every = 0 ("auto"): core/collective_cost.h (the predictor uses it too).
using sfb::auto_reconcile_every;

}  // namespace sfb::runtime
