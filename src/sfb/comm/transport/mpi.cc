#include "sfb/comm/transport/mpi.h"

#include <algorithm>
#include <climits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/error.h"
#include "sfb/core/timer.h"

namespace sfb::comm {

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  throw CommError(fmt::format("{} failed: {}", what, std::string(msg, static_cast<size_t>(len))));
}

MpiTransport::MpiTransport(MPI_Comm comm, int64_t max_chunk_bytes) : max_chunk_bytes_(max_chunk_bytes) {
  SFB_ENFORCE(max_chunk_bytes > 0 && max_chunk_bytes <= INT_MAX, "chunk {}", max_chunk_bytes);
  SFB_MPI_CALL(MPI_Comm_dup(comm, &comm_));
  // Errors come back as codes (and become CommError) instead of aborting inside MPI.
  SFB_MPI_CALL(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  SFB_MPI_CALL(MPI_Comm_rank(comm_, &rank_));
  SFB_MPI_CALL(MPI_Comm_size(comm_, &size_));
  dst_mu_ = std::make_unique<std::mutex[]>(static_cast<size_t>(size_));
  init_counters(size_);
}

MpiTransport::~MpiTransport() {
  try {
    flush();
  } catch (...) {
    // A failed peer: nothing more to deliver; the communicator is freed below regardless.
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

void MpiTransport::do_send(int dst, Tag tag, SharedBytes data) {
  const auto* base = data->data();
  const int64_t total = static_cast<int64_t>(data->size());
  std::lock_guard dst_lock(dst_mu_[dst]);
  int64_t off = 0;
  do {
    const int64_t n = std::min(max_chunk_bytes_, total - off);
    const bool last = off + n == total;
    Pending p{MPI_REQUEST_NULL, data, dst};
    // One logical message may span chunks: 2*tag+1 = "more follows", 2*tag = last chunk.
    SFB_MPI_CALL(MPI_Isend(base + off, static_cast<int>(n), MPI_BYTE, dst, 2 * tag + (last ? 0 : 1), comm_, &p.req));
    off += n;
    std::lock_guard lock(pending_mu_);
    pending_.push_back(std::move(p));
  } while (off < total);
  std::lock_guard lock(pending_mu_);
  progress_locked();
}

void MpiTransport::progress_locked() {
  auto it = std::remove_if(pending_.begin(), pending_.end(), [](Pending& p) {
    int done = 0;
    SFB_MPI_CALL(MPI_Test(&p.req, &done, MPI_STATUS_IGNORE));
    return done != 0;
  });
  pending_.erase(it, pending_.end());
}

std::optional<Message> MpiTransport::poll() {
  {
    std::lock_guard lock(pending_mu_);
    progress_locked();
  }
  int flag = 0;
  MPI_Message handle;
  MPI_Status status;
  SFB_MPI_CALL(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &handle, &status));
  if (!flag) return std::nullopt;
  int count = 0;
  SFB_MPI_CALL(MPI_Get_count(&status, MPI_BYTE, &count));
  Message m;
  m.src = status.MPI_SOURCE;
  m.tag = status.MPI_TAG / 2;
  m.data.resize(static_cast<size_t>(count));
  SFB_MPI_CALL(MPI_Mrecv(m.data.data(), count, MPI_BYTE, &handle, MPI_STATUS_IGNORE));
  bool more = (status.MPI_TAG % 2) == 1;
  while (more) {
    // The next message from this source is the following chunk (posted back to back).
    MPI_Status st;
    SFB_MPI_CALL(MPI_Probe(m.src, MPI_ANY_TAG, comm_, &st));
    if (st.MPI_TAG / 2 != m.tag)
      throw CommError(fmt::format("rank {}: chunked message from rank {} (tag {}) interrupted by tag {}", rank_, m.src,
                                  m.tag, st.MPI_TAG / 2));
    SFB_MPI_CALL(MPI_Get_count(&st, MPI_BYTE, &count));
    const size_t off = m.data.size();
    m.data.resize(off + static_cast<size_t>(count));
    SFB_MPI_CALL(MPI_Recv(m.data.data() + off, count, MPI_BYTE, m.src, st.MPI_TAG, comm_, MPI_STATUS_IGNORE));
    more = (st.MPI_TAG % 2) == 1;
  }
  return m;
}

void MpiTransport::barrier() { SFB_MPI_CALL(MPI_Barrier(comm_)); }

void MpiTransport::flush() {
  const auto deadline = deadline_after(peer_timeout_s());
  Backoff backoff;
  for (;;) {
    std::vector<int> waiting;
    {
      std::lock_guard lock(pending_mu_);
      progress_locked();
      for (const auto& p : pending_) waiting.push_back(p.dst);
    }
    if (waiting.empty()) return;
    if (SteadyClock::now() > deadline) {
      std::sort(waiting.begin(), waiting.end());
      waiting.erase(std::unique(waiting.begin(), waiting.end()), waiting.end());
      throw CommError(
          fmt::format("rank {}: sends to ranks {} still pending after {} s (runtime.peer_timeout_s): is the "
                      "peer stopped?",
                      rank_, fmt::join(waiting, ", "), peer_timeout_s()));
    }
    backoff.idle();
  }
}

std::unique_ptr<Transport> make_mpi_transport(MPI_Comm comm) {
  int provided = 0;
  SFB_MPI_CALL(MPI_Query_thread(&provided));
  if (provided < MPI_THREAD_MULTIPLE)
    throw CommError(
        fmt::format("MPI provides thread level {} but sfb needs MPI_THREAD_MULTIPLE ({}); "
                    "use an MPI built with thread support",
                    provided, MPI_THREAD_MULTIPLE));
  return std::make_unique<MpiTransport>(comm);
}

}  // namespace sfb::comm
