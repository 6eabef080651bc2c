#pragma once
// The MPI adapter of Transport (comm.transport = "mpi"), for networks where MPI reaches what TCP
// cannot (InfiniBand verbs, shared memory on one host).
//
// Sends are non-blocking (MPI_Isend), their buffers kept until MPI_Test reports completion, so two
// ranks sending large messages to each other never deadlock. A logical message larger than the
// segment size goes as a header (its length) and segments, each its own MPI message, posted back to
// back under a per-destination lock so they arrive in order; the MPI tag is 4 x tag + kind (0: a
// whole message, 1: a header, 2: a segment, 3: the last segment).
//
// Receives never block: poll() matches whatever has arrived from any source (MPI_Improbe) and posts
// a non-blocking receive for it (MPI_Imrecv) straight into the message's buffer, so several
// sources' large messages stream in at once and a small message from one rank is delivered while
// another rank's large one is still arriving; completed messages are delivered in order per source.
// Matched probes are safe when other threads also call MPI.
//
// Requires MPI_THREAD_MULTIPLE (checked by make_mpi_transport).
#include <mpi.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "sfb/comm/transport.h"

namespace sfb::comm {

// Throws CommError with MPI_Error_string when an MPI call fails.
#define SFB_MPI_CALL(call) ::sfb::comm::check_mpi((call), #call)
void check_mpi(int code, const char* what);

class MpiTransport : public Transport {
 public:
  static constexpr int64_t kSegmentBytes = int64_t{4} << 20;
  explicit MpiTransport(MPI_Comm comm, int64_t segment_bytes = kSegmentBytes);
  // Flushes (bounded by the peer timeout); sends still pending then are abandoned.
  ~MpiTransport() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  void flush() override;

 protected:
  void do_send(int dst, Tag tag, SharedBytes data) override;
  std::optional<Message> poll() override;

 private:
  void progress_sends_locked();
  void match_arrivals();
  void complete_receives();
  struct Pending {
    MPI_Request req;
    SharedBytes keep_alive;
    int dst;
  };
  // A message being received from one source: its buffer, how much of it is matched to posted
  // receives, and how many of those are still in flight.
  struct Incoming {
    Message m;
    size_t matched = 0;
    int in_flight = 0;
    bool known = false;  // the length is known (a whole message, or a header has arrived)
  };
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  int64_t segment_bytes_;
  std::mutex pending_mu_;
  std::vector<Pending> pending_;
  std::unique_ptr<std::mutex[]> dst_mu_;
  // Receiving (the polling thread only): per source, its messages in arrival order.
  std::vector<std::deque<Incoming>> incoming_;
  std::vector<MPI_Request> recv_reqs_;
  std::vector<Incoming*> recv_for_;  // the message each posted receive fills
  std::deque<Message> ready_;        // complete, in per-source order
};

// Duplicates `comm` (so our tags never meet the caller's) and checks the thread level.
std::unique_ptr<Transport> make_mpi_transport(MPI_Comm comm);

}  // namespace sfb::comm
