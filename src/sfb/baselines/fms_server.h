#pragma once
// One FMS parameter server (a rank after the P workers; see fms_exchange.h). It receives its rows
// of the initial W from rank 0, then for every clock c waits for the PUSH of all P workers, adds
// them to its rows in worker-rank order (so the result does not depend on arrival order), and
// sends the new rows (version c + 1) to every worker, one serialised buffer for all. It ends when
// every worker has said BYE; a worker silent for runtime.peer_timeout_s while the server waits is
// an error naming it.
//
// Threads: run() is the only thread.
#include <cstdint>

#include <map>
#include <vector>

#include "sfb/baselines/ps_codec.h"
#include "sfb/comm/transport.h"
#include "sfb/core/config.h"
#include "sfb/core/timer.h"

namespace sfb::baselines {

struct ServerStats {
  int64_t clocks = 0;          // versions published
  double apply_s = 0;          // adding the pushes to the rows
  comm::PeerCounters traffic;  // the server's bytes and messages, all peers
};

class FmsServer {
 public:
  FmsServer(const FmsConfig& cfg, double peer_timeout_s, comm::Transport& transport);
  ServerStats run();

 private:
  void handle(comm::Message& m);
  void on_init(comm::Message& m, const PsHeader& h);
  void on_push(comm::Message& m, const PsHeader& h);
  void publish_complete_clocks();
  void check_timeout() const;

  const double peer_timeout_s_;
  comm::Transport& t_;
  int P_, S_, s_;
  ServerStats st_;
  Matrix rows_;  // this server's rows of W
  int64_t row_begin_ = 0, version_ = -1;
  std::map<int64_t, std::vector<comm::Message>> pushes_;  // clock -> one PUSH per worker (empty until it arrives)
  std::map<int64_t, int> push_count_;
  std::vector<char> bye_;
  int byes_ = 0;
  std::vector<comm::Message> early_;  // PUSH messages that arrived before INIT
  Stopwatch last_progress_;
};

}  // namespace sfb::baselines
