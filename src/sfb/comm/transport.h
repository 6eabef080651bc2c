#pragma once
// Tagged point-to-point byte transport for one group of ranks. Algorithms see only this
// interface: tests run N ranks as threads over the in-process transport, real runs use MPI.
//
// send()/send_shared() may be called from any thread; try_recv() from one thread at a time.
// Every call throws CommError on failure. Per-peer byte and message counters count logical
// messages (payload bytes, no framing) and may be read from any thread.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sfb/core/bytes.h"
#include "sfb/core/timer.h"

namespace sfb::comm {

using Tag = int32_t;
inline constexpr Tag kTagSf = 1;           // SfBatch messages
inline constexpr Tag kTagControl = 2;      // runtime control (stop protocol, done)
inline constexpr Tag kTagCollective = 3;   // collectives outside the training loop
inline constexpr Tag kTagPs = 4;           // parameter server: push, pull, init, bye (baselines/fms)
inline constexpr Tag kTagReduce = 5;       // all-reduce segments (comm/allreduce.h)
inline constexpr Tag kTagProbe = 6;        // the CNN re-planner's timing all-reduces
inline constexpr Tag kTagProbeSf = 7;      // the CNN re-planner's timing SF all-gathers
inline constexpr Tag kTagReconcile = 8;    // partial broadcast's replica reconciliation (runtime/reconciler.h)
inline constexpr Tag kTagShardRows = 9;    // sharded scheme: the minibatch rows' all-gather (runtime/sharded_worker.h)
inline constexpr Tag kTagShardStats = 10;  // sharded scheme: the per-sample statistics' all-gather
inline constexpr Tag kTagShardW = 11;      // sharded scheme: W's rows to and from their owners (files)
inline constexpr Tag kMaxTag = 1000;

using Bytes = sfb::Bytes;
using SharedBytes = std::shared_ptr<const Bytes>;

struct Message {
  int src = -1;
  Tag tag = 0;
  Bytes data;
};

struct PeerCounters {
  int64_t bytes_sent = 0;
  int64_t msgs_sent = 0;
  int64_t bytes_received = 0;
  int64_t msgs_received = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends a copy of `data`.
  void send(int dst, Tag tag, std::span<const std::byte> data);
  // Sends `data` without copying; the buffer is kept alive until the send has completed, so one
  // serialised buffer can go to every peer.
  void send_shared(int dst, Tag tag, SharedBytes data);
  // Next message of any tag (messages stashed by try_recv(tag) first, in arrival order).
  std::optional<Message> try_recv();
  // Next message with this tag; messages of other tags are stashed for try_recv().
  std::optional<Message> try_recv(Tag tag);
  // Blocks until a message with this tag arrives (polling, for collectives); throws CommError
  // after peer_timeout_s() without one.
  Message recv(Tag tag);
  virtual void barrier() = 0;
  // Blocks until every send posted so far has left this rank's buffers; throws CommError naming
  // the destinations still pending after peer_timeout_s().
  virtual void flush() {}
  // How long recv() and flush() wait on peers (runtime.peer_timeout_s; 600 s until set). Every
  // wait on a peer is bounded: a stopped or lost peer becomes an error, never a hang.
  virtual void set_peer_timeout(double seconds) { peer_timeout_s_ = seconds; }
  double peer_timeout_s() const { return peer_timeout_s_; }

  // True when `peer` has closed its connection (it has exited, or its connection broke): nothing
  // more will arrive from it. Transports that cannot tell say false.
  virtual bool peer_gone(int /*peer*/) const { return false; }
  // Blocks until a message may be ready for try_recv() or `until` passes; false when the transport
  // cannot wait (the caller then backs off and polls).
  virtual bool wait_for_message(SteadyClock::time_point /*until*/) { return false; }
  // Makes the wait_for_message() blocked now, or the next one, return at once: for a receiving
  // thread that also waits on work of its own (the communication thread's queues), whose producers
  // call it. Any thread; a transport that cannot wait ignores it.
  virtual void wake() {}
  // CPU seconds so far of the threads the transport runs itself (TCP's I/O thread, which makes the
  // socket calls and so is charged the kernel's work on them); 0 for one that runs none (in-process,
  // MPI: its sends and receives run on the calling threads). Any thread.
  virtual double own_threads_cpu_seconds() const { return 0.0; }

  PeerCounters counters(int peer) const;
  PeerCounters total_counters() const;
  // " (ranks 2, 3 have closed their connections)" or "", for errors about silent peers.
  std::string gone_peers() const;

 protected:
  void init_counters(int size);
  virtual void do_send(int dst, Tag tag, SharedBytes data) = 0;
  virtual std::optional<Message> poll() = 0;

 private:
  struct AtomicCounters {
    std::atomic<int64_t> bytes_sent{0}, msgs_sent{0}, bytes_received{0}, msgs_received{0};
  };
  std::unique_ptr<AtomicCounters[]> counters_;
  int counters_size_ = 0;
  std::deque<Message> stash_;  // touched only by the receiving thread
  std::atomic<double> peer_timeout_s_{600.0};
};

// "SF batch", "control", ...: what a tag carries, for messages.
const char* tag_name(Tag tag);

// N ranks in one process (tests, benchmarks): transports[i] is rank i.
std::vector<std::unique_ptr<Transport>> make_inproc_group(int size);

}  // namespace sfb::comm
