#pragma once
// The clocks of one worker (worker.h), shared by its three threads behind one mutex, and the rule
// that says when the SF-compute thread may start clock c (docs/design.md, "Consistency"). Nothing
// of the state is reachable but through these methods; each says which thread calls it.
//
// SSP rule: clock c may start once every in-neighbour's batches of clocks < c - s are applied. A
// worker always reads its own writes (as in Petuum's SSP): its own batches of clocks < c must be
// applied too, or under ASP a fast compute thread would compute many clocks from the same stale W.
// ASP has no staleness bound, but without any a fast worker floods a slow one's network buffers
// (unexpected MPI messages) and memory grows without limit (found by scripts/soak.sh with 8 ranks
// on 2 cores), so ASP keeps a flow-control window of runtime.asp_window clocks. A baseline gets its
// own update back with everyone's; FMS under SSP/ASP also applies it at once (reads_own_writes), as
// a Bosen client keeps its oplog applied to its cache. No clock starts past the next partial-
// broadcast reconciliation point (reconciler.h) before the reconciliation is done.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "sfb/core/sf_batch.h"

namespace sfb::runtime {

class ClockGate {
 public:
  struct Rule {
    int rank = 0;
    int workers = 0;
    std::vector<int> sources;       // in-neighbours and this rank, ascending: the BSP apply order
    int64_t bound = 0;              // staleness s, or ASP's window
    bool own_batches = true;        // SFB: this rank's own batches of clocks < c must be applied
    bool reads_own_writes = false;  // a baseline's own updates (DenseUpdate::kOwn) of clocks < c must be applied
    int64_t reconcile_every = 0;    // 0: no reconciliation
    std::string exchange;           // the baseline's name ("" for SFB), for messages
    std::string via;                // " (their clocks come through ...)" for the timeout message
  };
  ClockGate(Rule rule, int64_t start_clock, int64_t stop_at);

  // SF-compute thread. Waits until clock c may start; false when the job stops before it (then
  // this rank has computed every clock) or aborts. Throws CommError naming the late ranks after
  // timeout_s without the clock becoming allowed. Adds the time waited to *waited_s.
  bool wait_for_clock(int64_t c, double timeout_s, double* waited_s);
  void own_committed();  // this rank's batch of its next clock is queued
  int64_t max_lead() const;

  // Communication thread.
  void received(int src, int64_t clock);  // an SF batch arrived; CommError when out of sequence
  int64_t pause();                        // a stop query: start no new clock; returns the clocks started
  void resume(int64_t at);                // STOP_AT: every rank computes the clocks before `at`
  bool done() const;                      // computed and applied everything

  // Update thread.
  // Batches applied (SF batches or clock markers): CommError on a gap or repeat of a sender's clocks.
  void applied(std::span<const SfBatch* const> batches);
  // A baseline's dense item: own update (DenseUpdate::kOwn) of `clock`, or every source's clock `clock`.
  void applied_own_dense(int64_t clock);
  void applied_dense(int64_t clock);
  void reconciled(int64_t clock);
  // The clocks every source's batches have been applied up to.
  int64_t applied_by_every_source() const;
  bool all_applied() const;  // compute done and every source applied up to stop_at
  void update_finished();

  // Any thread.
  int64_t stop_at() const;
  void abort();  // wakes the compute thread for good

 private:
  bool allowed(int64_t c) const;
  std::string waiting_for(int64_t c) const;
  int64_t applied_by_every_source_locked() const;

  const Rule rule_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> applied_;   // per rank: batches applied (= clocks, they arrive in order)
  std::vector<int64_t> received_;  // per rank: batches received (own: committed), for diagnostics
  int64_t own_applied_ = 0;        // a baseline with read-my-writes: own kOwn updates applied
  int64_t stop_at_ = 0;            // clocks every rank computes
  int64_t started_ = 0;            // clocks this rank has started computing
  int64_t reconciled_ = 0;         // the clock of the last reconciliation
  int64_t max_lead_ = 0;           // the most clocks this rank ran ahead of a source
  bool paused_ = false;            // a stop query is open
  bool compute_done_ = false, update_done_ = false, aborted_ = false;
};

}  // namespace sfb::runtime
