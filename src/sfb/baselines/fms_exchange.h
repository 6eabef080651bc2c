#pragma once
// Full-matrix synchronisation through parameter servers (the Petuum Bosen baseline), worker side.
// Servers are the last S ranks; server s holds rows [J s / S, J (s+1) / S) of W. Every clock a
// worker pushes each server its rows of the dense update dW_p = U^T V in blocks (64 KiB - 1 MiB,
// ps_codec.h; block k of every server before block k + 1, so all servers start at once), each
// block formed from the batch's factors as it is pushed (no W-sized update is ever held), and hands
// every pulled block of the version after a clock to the update thread, which replaces those rows
// of W (kReplace items; the one that completes the version says so); the servers send each block
// back as soon as all workers' pushes of it are in, so pulls come in while pushes still go out. Flow control: at most
// kWindow blocks per server are pushed and not yet pulled back, so the workers' pushes to a server advance together (a
// worker whose flow gets more of the server's link waits for the others instead of queueing blocks the server cannot
// add yet) and a server holds at most kWindow blocks per worker. A model with a general prox (Model::has_prox: sparse
// coding's column projection couples every row) makes the servers clock-granular: they answer a clock only once all of
// its blocks are in, so the worker then pushes whole clocks without a window (a window would wait for pulls that cannot
// come). Staleness works as for SFB: clock c starts when the servers' W includes every worker's clocks < c - s. Bytes
// per clock: P J D floats pushed and P J D pulled.
//
// Read-my-writes under SSP/ASP (staleness > 0), as a Bosen client keeps its oplog applied to its
// cache: the worker applies its own batch of clock c at once (a kOwn item), keeps the batch (its
// factors, not its dense update) until a version that includes it arrives, and replaces each row
// block by the servers' rows plus its own updates not yet in them. The staleness gate is unchanged (clock c starts when
// the servers' W includes every worker's clocks < c - s) and clock c also waits for its own c - 1, so a worker never
// computes from a W that lacks its own recent updates. Under BSP the next version always includes the worker's own
// clock before it may start another, so nothing is kept.
//
// Memory: the blocks in flight (kWindow per server, rank 0's INIT blocks too) and the pulled blocks not yet applied (a
// pool of 2 kWindow per server: the communication thread waits for the update thread past it). With whole_clocks the
// pushes of a clock are queued whole on the transport (sparse coding's FMS only).
//
// Threads: everything runs on the worker's communication thread.
#include <deque>
#include <map>
#include <memory>

#include "sfb/baselines/ps_codec.h"
#include "sfb/core/buffer_pool.h"
#include "sfb/core/collective_cost.h"
#include "sfb/runtime/exchange.h"

namespace sfb::baselines {

// A worker's BYE to every server (ranks workers..t.size() - 1): the last message a server takes from
// it, once; a server's run() ends when every worker's is in.
void send_bye_to_servers(comm::Transport& t, int workers);

class FmsExchange final : public runtime::Exchange {
 public:
  // `whole_clocks`: the servers apply a general prox and answer whole clocks (see above).
  FmsExchange(int servers, bool read_my_writes, bool whole_clocks)
      : S_(servers),
        rmw_(read_my_writes),
        whole_clocks_(whole_clocks),
        pulled_(static_cast<int>(2 * kWindow * servers)) {}
  std::string name() const override { return "fms"; }
  void start(const runtime::ExchangeHost& host) override;
  void send_own(const SfBatchPtr& batch) override;
  // Pushes this worker's dense update of `batch` to the servers, block by block: as many blocks as
  // the window allows now, the rest as pulls come back (on_message).
  void push(const SfBatchPtr& batch);
  static constexpr int64_t kWindow = kPsWindowBlocks;
  bool handles(comm::Tag tag) const override { return tag == comm::kTagPs; }
  bool reads_own_writes() const override { return rmw_; }
  void on_message(comm::Message&& m) override;
  void finish() override;
  void abort() override { pulled_.abort(); }

 private:
  struct Assembly {
    int64_t rows = 0;         // received so far; complete at the stored rows
    std::vector<char> block;  // per server, per block: received (duplicates are refused)
  };
  runtime::ExchangeHost host_;
  void send_initial_w(const runtime::ExchangeHost& host);
  void deliver_pulled(const PsHeader& h, const comm::Message& m, bool last);
  void pump();

  // Updates with blocks still to push, oldest clock first.
  struct Outgoing {
    SfBatchPtr batch;
    std::vector<int64_t> next;  // per server: its next block to push
  };
  std::deque<Outgoing> outgoing_;
  std::vector<int64_t> in_flight_;  // per server: blocks pushed, not yet pulled back

  int S_;
  bool rmw_;
  bool whole_clocks_;
  int rank_ = 0;
  std::vector<PsBlocks> blocks_;          // per server
  std::vector<int64_t> first_block_;      // per server: its blocks' offset in Assembly::block
  std::map<int64_t, SfBatchPtr> own_;     // read-my-writes: own batches not yet in a version
  std::map<int64_t, Assembly> versions_;  // version -> rows received so far
  int64_t next_version_ = 0;
  Matrix block_, own_rows_;  // reused: a push block being formed, an own update's rows
  // Pulled blocks handed to the update thread. Sized here, never reassigned: abort() reads it from
  // any thread, while start() may still be seeding the servers.
  BufferPool pulled_;
};

}  // namespace sfb::baselines
