#pragma once
// The MPI adapter of Transport. Sends are non-blocking (MPI_Isend) and their buffers are kept
// until MPI_Test reports completion, so two ranks sending large messages to each other never
// deadlock. Receives use matched probes (MPI_Improbe + MPI_Mrecv), which are safe when other
// threads also call MPI. A logical message larger than kMaxChunkBytes goes as several MPI
// messages: every chunk but the last uses MPI tag 2*tag+1, the last 2*tag; chunks of one message
// are posted back to back under a per-destination lock, so they arrive in order.
//
// Requires MPI_THREAD_MULTIPLE (checked by make_mpi_transport).
#include <mpi.h>

#include <cstdint>
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
  static constexpr int64_t kMaxChunkBytes = int64_t{1} << 30;
  explicit MpiTransport(MPI_Comm comm, int64_t max_chunk_bytes = kMaxChunkBytes);
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
  void progress_locked();
  struct Pending {
    MPI_Request req;
    SharedBytes keep_alive;
    int dst;
  };
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  int64_t max_chunk_bytes_;
  std::mutex pending_mu_;
  std::vector<Pending> pending_;
  std::unique_ptr<std::mutex[]> dst_mu_;
};

// Duplicates `comm` (so our tags never meet the caller's) and checks the thread level.
std::unique_ptr<Transport> make_mpi_transport(MPI_Comm comm);

}  // namespace sfb::comm
