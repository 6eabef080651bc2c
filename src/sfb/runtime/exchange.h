#pragma once
// Exchange: how a worker's updates reach the other workers when the scheme is not SFB. The
// worker (worker.h) runs the same SF-compute thread, update thread, monitor and stop protocol
// under every scheme; an Exchange replaces only what its communication thread does with the
// rank's own batches and with the messages of the tags it claims, and delivers to the update thread
// DenseUpdate items: row blocks of the stored matrix that together cover one clock of every worker
// (kSum, kReplace; the last block of a clock says so), and, with read-my-writes, this worker's own
// batches (kOwn). No exchange holds a W-sized update: blocks are bounded (docs/design.md, "Memory").
// Implementations live in src/sfb/baselines (FMS, all-reduce).
//
// Threads: start(), send_own(), on_message() and finish() are called by the worker's communication
// thread; abort() by whichever thread fails first. An implementation may run threads of its own;
// it reports their errors through ExchangeHost::fail.
#include <functional>

#include "sfb/comm/transport.h"
#include "sfb/core/sf_batch.h"

namespace sfb::runtime {

// What an exchange hands the update thread (never on the wire): one row block of the stored matrix
// (the workers' layout) for one clock, or this worker's own batch.
struct DenseUpdate {
  enum class Kind : uint8_t {
    kSum,      // stored rows += block: the sum over every worker of clock `clock`'s update (all-reduce)
    kReplace,  // stored rows = block: the servers' W after every worker's clock `clock` (FMS)
    kOwn,      // this worker's own batch of `clock`, applied at once (FMS read-my-writes under SSP/ASP)
  };
  Kind kind = Kind::kSum;
  int64_t clock = 0;
  int64_t row_begin = 0, rows = 0;
  std::shared_ptr<const Matrix> block;  // kSum, kReplace: its first `rows` rows are stored rows row_begin..
  SfBatchPtr own;                       // kOwn
  bool last = false;                    // kSum, kReplace: the clock's update is complete with this block
};
using DenseUpdatePtr = std::shared_ptr<const DenseUpdate>;

struct ExchangeHost {
  comm::Transport* transport = nullptr;
  int workers = 0;  // ranks 0 .. workers-1 train; any further ranks serve
  int32_t J = 0, D = 0;
  // The workers' layout of W: the dense items the exchange delivers, initial_W and whatever it
  // shards are stored matrices in this layout (rows() x cols(): J x D, or D x J feature-major).
  Layout layout = Layout::kRowMajor;
  int64_t rows() const { return stored_rows(layout, J, D); }
  int64_t cols() const { return stored_cols(layout, J, D); }
  int64_t start_clock = 0;
  const Matrix* initial_W = nullptr;            // valid during start()
  std::function<void(DenseUpdatePtr)> deliver;  // to the update thread (a clock's last block in clock order)
  std::function<void(std::exception_ptr)> fail;
};

class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual std::string name() const = 0;
  virtual void start(const ExchangeHost& host) = 0;
  // This rank's batch of its next clock (clock order).
  virtual void send_own(const SfBatchPtr& batch) = 0;
  virtual bool handles(comm::Tag tag) const = 0;
  // True when the exchange delivers this worker's own update of every clock as a kOwn item
  // (read-my-writes): clock c then also waits for the own update of c - 1 to be applied.
  virtual bool reads_own_writes() const { return false; }
  virtual void on_message(comm::Message&& m) = 0;
  // After the job's FINAL message: release servers, join threads.
  virtual void finish() = 0;
  virtual void abort() = 0;
};

}  // namespace sfb::runtime
