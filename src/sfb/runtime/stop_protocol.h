#pragma once
// The stop protocol and the final handshake of one worker, as a state machine with one method per
// control message (as ps-lite's van handles one command per method). It owns no thread and no
// transport: the worker's communication thread feeds it messages and local events, and it acts
// through StopProtocolIo (send a control message; pause, resume or query the compute thread's
// clock gate). Unit-tested without threads (tests/runtime/stop_protocol_test.cc).
//
//  1. A stop decision (rank 0's monitor or time limit, a signal on rank 0, or STOP_REQUEST from a
//     signalled rank) makes rank 0 pause and send STOP_QUERY to every worker.
//  2. Each rank pauses before starting another clock and replies STOP_REPLY with the clocks it has
//     started.
//  3. When every reply is in, rank 0 sends STOP_AT = the largest (capped by stop.max_clocks); every
//     rank computes and applies up to that clock.
//  4. A rank that has computed and applied everything sends DONE with its statistics; rank 0 sends
//     FINAL once every rank is done and no query is open, so no rank leaves while a peer may still
//     talk to it.
// Without a stop decision every rank runs to stop.max_clocks and only step 4 happens.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sfb/core/stop_reason.h"
#include "sfb/runtime/control_codec.h"
#include "sfb/runtime/rank_stats.h"

namespace sfb::runtime {

struct StopProtocolIo {
  // Sends a control message from this rank to `dst`.
  std::function<void(int dst, ControlType type, int64_t value, std::vector<int64_t> payload)> send;
  // Start no new clock; returns the clocks this rank has started.
  std::function<int64_t()> pause;
  // Every rank computes `stop_at` clocks; clocks may start again. Throws CommError when this rank
  // has already started a clock beyond it.
  std::function<void(int64_t stop_at)> resume;
};

class StopProtocol {
 public:
  // `max_clocks`: stop.max_clocks, the cap of STOP_AT.
  StopProtocol(int rank, int workers, int64_t max_clocks, StopProtocolIo io);

  // Local events (the communication thread).
  // A reason to stop seen on this rank: on rank 0 it starts the protocol, elsewhere a signal
  // (`signal` > 0) becomes a STOP_REQUEST to rank 0; a second request is ignored.
  void request_stop(StopReason reason, const std::string& detail = {}, int signal = 0);
  // This rank has computed and applied every clock: DONE with `stats` (rank 0 keeps its own).
  void local_done(const RankStats& stats);

  // One method per control message; handle() checks the sender's right to send it and dispatches.
  void handle(const ControlMsg& m, int from);
  void on_stop_request(int from, int64_t signal);
  void on_stop_query(int from);
  void on_stop_reply(int from, int64_t started);
  void on_stop_at(int from, int64_t stop_at);
  void on_done(int from, const std::vector<int64_t>& stats);
  void on_final(int from);

  // Rank 0: when every rank is done and no query is open, sends FINAL and returns true; other
  // ranks: true once FINAL has arrived after their DONE. The communication thread then leaves.
  bool try_finish();

  bool stop_asked() const { return stop_asked_; }
  bool done_sent() const { return done_sent_; }
  // Waiting on peers (a query open, or done and not yet released): the peer timeout applies.
  bool waiting_on_peers() const { return query_open_ || done_sent_; }
  // What this rank waits for, for the timeout message: "STOP_REPLY from ranks 1, 3", ...
  std::string waiting_for() const;
  // Rank 0: why the job stopped (max_clocks without a decision), who or what asked ("rank 2
  // received signal 15"; empty at max_clocks), and every rank's statistics.
  StopReason stop_reason() const { return stop_reason_; }
  const std::string& stop_detail() const { return stop_detail_; }
  const std::vector<RankStats>& all_stats() const { return all_stats_; }

 private:
  void send_all(ControlType type, int64_t value);
  void close_query();

  const int rank_, workers_;
  const int64_t max_clocks_;
  StopProtocolIo io_;
  StopReason stop_reason_ = StopReason::kMaxClocks;
  std::string stop_detail_;
  bool stop_asked_ = false;
  bool query_open_ = false;    // rank 0: STOP_QUERY sent, replies pending
  std::vector<char> replied_;  // rank 0: per rank, for the open query
  int64_t max_started_ = 0;    // rank 0: over the replies and itself
  bool done_sent_ = false;
  bool got_final_ = false;
  std::vector<char> done_;            // rank 0: per rank
  std::vector<RankStats> all_stats_;  // rank 0
};

}  // namespace sfb::runtime
