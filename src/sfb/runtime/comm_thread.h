#pragma once
// The worker's communication thread (worker.h): sends this rank's batches to its out-neighbours
// (or hands them to a baseline's exchange), receives peers' batches into the in-queue, feeds
// control messages and local stop reasons to the stop protocol, forwards replica-drift sketches to
// rank 0, and reports a peer that stays silent. It owns the per-destination counts of pairs sent,
// the stop protocol and, on rank 0, the drift collector.
#include <memory>
#include <vector>

#include "sfb/runtime/replica_drift.h"
#include "sfb/runtime/stop_protocol.h"
#include "sfb/runtime/worker_state.h"

namespace sfb::runtime {

class CommThread {
 public:
  explicit CommThread(WorkerState& s);
  void run();

  // Read by this thread, or by anyone after the threads have ended.
  const std::vector<int64_t>& pairs_sent_to() const { return pairs_sent_to_; }
  int64_t pairs_received() const { return pairs_received_; }
  int64_t v_nonzeros_sent() const { return v_nonzeros_sent_; }
  const StopProtocol& stop() const { return *stop_; }
  // This thread's CPU seconds over run() (0 until it returns): encoding, sending, receiving and
  // decoding the batches, the stop protocol, a baseline's exchange; -1 when it polled (a transport
  // that cannot wait: MPI's, the in-process one, the latency emulation's), its CPU then filling what
  // idle time the rank's cores had, which says nothing of what the messages cost.
  double cpu_s() const { return polled_ ? -1.0 : cpu_s_; }

 private:
  void loop();
  void start_exchange();
  bool send_own_batches();
  bool receive_messages();
  bool send_drift_sketches();
  void on_drift_sketch(int64_t clock, int sender, std::vector<double> sketch);
  void receive_sf(comm::Message&& m);
  void check_stop_reasons();
  bool report_if_done();
  void check_peer_timeout(bool progress, Stopwatch& last_progress) const;

  WorkerState& s_;
  std::vector<int64_t> pairs_sent_to_;
  int64_t pairs_received_ = 0;
  int64_t v_nonzeros_sent_ = 0;  // sparse v, summed over destinations
  double cpu_s_ = 0;
  bool polled_ = false;
  std::unique_ptr<DriftCollector> drift_;  // rank 0
  std::unique_ptr<StopProtocol> stop_;
};

}  // namespace sfb::runtime
