#pragma once
// One FMS parameter server (a rank after the P workers; see fms_exchange.h). It holds its shard of
// W and nothing W-sized: it receives its rows of the initial W from rank 0 in blocks (INIT, the same
// grid as PUSH and PULL, each answered by an INIT_ACK: rank 0 keeps at most kPsWindowBlocks of them
// unanswered, so no more wait in this server's inbox), then for every clock c the PUSH of all P workers, in blocks of
// rows (ps_codec.h). Pipelined: as soon as every worker's block b of clock c is in, it adds them to the block's rows in
// worker-rank order (so the result does not depend on arrival order), applies a scaling prox after each (below), and
// sends the block's new rows (version c + 1) to every worker, one serialised buffer for all, while the clock's later
// blocks are still arriving: the server's link carries pushes in and pulls out at once. A model with a general prox
// needs the whole W of a clock first: its server waits for every block, then proceeds as below and publishes the
// blocks. It ends when every worker has said BYE; a peer silent for runtime.peer_timeout_s while the server waits is an
// error naming it (before the run's first message, the longer of that and what run() is given: the workers may have
// work of their own first, as sfbd --profile's measurements).
//
// The proximal step (runtime::ModelProx): a scaling prox (L2-MLR's 1 / (1 + eta lambda)) is
// row-separable: W <- c (W + dW_p) for each worker p in rank order, as the worker's update thread
// does. A general prox may couple rows (sparse coding projects every column of W onto the unit
// ball), so with S > 1 servers each one sends its summed rows to the others (SHARD), every server
// assembles the whole W, applies the prox once per worker's batch, and keeps its rows: identical on
// every server, at (S - 1) / S x J x D floats received per server per clock. With S = 1 the server
// holds W and applies it in place.
//
// Threads: run() is the only thread.
#include <cstdint>

#include <map>
#include <string>
#include <vector>

#include "sfb/baselines/ps_codec.h"
#include "sfb/comm/transport.h"
#include "sfb/core/config.h"
#include "sfb/core/timer.h"
#include "sfb/runtime/model_prox.h"

namespace sfb::baselines {

struct ServerStats {
  int64_t clocks = 0;          // versions published
  double apply_s = 0;          // adding the pushes to the rows
  comm::PeerCounters traffic;  // the server's bytes and messages, all peers
};

class FmsServer {
 public:
  // `rows` x `cols`: the workers' stored W (their layout), which it shards with the others;
  // `prox`: the model's proximal step (runtime::model_prox); empty callbacks for none.
  FmsServer(const FmsConfig& cfg, double peer_timeout_s, comm::Transport& transport, int64_t rows, int64_t cols,
            runtime::ModelProx prox = {});
  // Serves until every worker's BYE; the first message may take `first_message_s` (at least the
  // peer timeout).
  ServerStats run(double first_message_s = 0);

 private:
  void handle(comm::Message& m);
  void on_init(comm::Message& m, const PsHeader& h);
  void on_push(comm::Message& m, const PsHeader& h);
  void on_shard(comm::Message& m, const PsHeader& h);
  void apply_ready_blocks(int64_t b);
  void apply_block(int64_t clock, int64_t b);
  void publish_block(int64_t version, int64_t b);
  void publish_complete_clocks();
  bool gathered_prox();
  void check_timeout(double limit_s) const;
  std::string missing_pushes() const;
  std::string waiting_for() const;

  // The PUSH blocks of one clock: per block, one message per worker (empty until it arrives).
  struct ClockPushes {
    std::vector<std::vector<comm::Message>> block;
    std::vector<int> count;
    int64_t complete = 0;  // blocks with every worker's push
    int64_t applied = 0;   // pipelined: blocks added and published
  };

  const double peer_timeout_s_;
  comm::Transport& t_;
  const runtime::ModelProx prox_;
  int P_, S_, s_;
  ServerStats st_;
  Matrix rows_;                           // this server's rows of W
  int64_t row_begin_ = 0, version_ = -1;  // every row holds at least version_ (-1: INIT not complete)
  std::vector<char> init_block_;          // INIT blocks received
  int64_t init_blocks_ = 0;
  PsBlocks blocks_;
  std::vector<int64_t> block_next_;  // pipelined: the next clock of each block
  std::map<int64_t, ClockPushes> pushes_;
  std::vector<char> bye_;
  int byes_ = 0;
  std::vector<comm::Message> early_;  // PUSH and SHARD messages that arrived before INIT
  // A general prox with S > 1: the other servers' rows of version_ (SHARD), by clock and server.
  bool gathering_ = false;
  std::map<int64_t, std::vector<comm::Message>> shards_;
  Matrix whole_;  // W assembled from every server's rows (reused)
  Stopwatch last_progress_;
};

}  // namespace sfb::baselines
