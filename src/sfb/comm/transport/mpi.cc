#include "sfb/comm/transport/mpi.h"

#include <algorithm>
#include <climits>
#include <cstring>

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

namespace {
constexpr int kWhole = 0, kHeader = 1, kSegment = 2, kLast = 3;
}  // namespace

MpiTransport::MpiTransport(MPI_Comm comm, int64_t segment_bytes) : segment_bytes_(segment_bytes) {
  SFB_ENFORCE(segment_bytes > 0 && segment_bytes <= INT_MAX, "segment {}", segment_bytes);
  SFB_MPI_CALL(MPI_Comm_dup(comm, &comm_));
  // Errors come back as codes (and become CommError) instead of aborting inside MPI.
  SFB_MPI_CALL(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  SFB_MPI_CALL(MPI_Comm_rank(comm_, &rank_));
  SFB_MPI_CALL(MPI_Comm_size(comm_, &size_));
  dst_mu_ = std::make_unique<std::mutex[]>(static_cast<size_t>(size_));
  incoming_.resize(static_cast<size_t>(size_));
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
  if (!finalized) {
    for (auto& r : recv_reqs_) MPI_Cancel(&r);
    MPI_Comm_free(&comm_);
  }
}

void MpiTransport::do_send(int dst, Tag tag, SharedBytes data) {
  const auto* base = data->data();
  const auto total = static_cast<int64_t>(data->size());
  std::lock_guard dst_lock(dst_mu_[dst]);
  auto post = [&](const std::byte* p, int64_t n, int kind) {
    Pending pd{MPI_REQUEST_NULL, data, dst};
    SFB_MPI_CALL(MPI_Isend(p, static_cast<int>(n), MPI_BYTE, dst, 4 * tag + kind, comm_, &pd.req));
    std::lock_guard lock(pending_mu_);
    pending_.push_back(std::move(pd));
  };
  if (total <= segment_bytes_) {
    post(base, total, kWhole);
  } else {
    // The length first (its own buffer), then the segments.
    Bytes length(sizeof(total));
    std::memcpy(length.data(), &total, sizeof(total));
    const auto head = std::make_shared<const Bytes>(std::move(length));
    Pending pd{MPI_REQUEST_NULL, head, dst};
    SFB_MPI_CALL(MPI_Isend(head->data(), sizeof(int64_t), MPI_BYTE, dst, 4 * tag + kHeader, comm_, &pd.req));
    {
      std::lock_guard lock(pending_mu_);
      pending_.push_back(std::move(pd));
    }
    for (int64_t off = 0; off < total; off += segment_bytes_) {
      const int64_t n = std::min(segment_bytes_, total - off);
      post(base + off, n, off + n == total ? kLast : kSegment);
    }
  }
  std::lock_guard lock(pending_mu_);
  progress_sends_locked();
}

void MpiTransport::progress_sends_locked() {
  auto it = std::remove_if(pending_.begin(), pending_.end(), [](Pending& p) {
    int done = 0;
    SFB_MPI_CALL(MPI_Test(&p.req, &done, MPI_STATUS_IGNORE));
    return done != 0;
  });
  pending_.erase(it, pending_.end());
}

// Posts a receive for everything that has arrived from any source, in each source's order.
void MpiTransport::match_arrivals() {
  for (;;) {
    int flag = 0;
    MPI_Message handle;
    MPI_Status st;
    SFB_MPI_CALL(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &handle, &st));
    if (!flag) return;
    int count = 0;
    SFB_MPI_CALL(MPI_Get_count(&st, MPI_BYTE, &count));
    const int src = st.MPI_SOURCE, kind = st.MPI_TAG % 4;
    const Tag tag = st.MPI_TAG / 4;
    auto& q = incoming_[static_cast<size_t>(src)];
    if (kind == kHeader) {
      int64_t total = 0;
      if (count != sizeof(total))
        throw CommError(fmt::format("rank {}: message header of {} bytes from rank {}", rank_, count, src));
      SFB_MPI_CALL(MPI_Mrecv(&total, count, MPI_BYTE, &handle, MPI_STATUS_IGNORE));
      if (total <= 0 || total > (int64_t{1} << 40))
        throw CommError(fmt::format("rank {}: rank {} announces a message of {} bytes", rank_, src, total));
      Incoming in;
      in.m = Message{src, tag, Bytes(static_cast<size_t>(total))};
      in.known = true;
      q.push_back(std::move(in));
      continue;
    }
    Incoming* into = nullptr;
    if (kind == kWhole) {
      Incoming in;
      in.m = Message{src, tag, Bytes(static_cast<size_t>(count))};
      in.known = true;
      q.push_back(std::move(in));
      into = &q.back();
    } else {
      // A segment belongs to this source's newest message, which must still be missing bytes.
      if (q.empty() || q.back().m.tag != tag || q.back().matched + static_cast<size_t>(count) > q.back().m.data.size())
        throw CommError(
            fmt::format("rank {}: segment of {} bytes (tag {}) from rank {} fits no message", rank_, count, tag, src));
      into = &q.back();
    }
    MPI_Request req = MPI_REQUEST_NULL;
    SFB_MPI_CALL(MPI_Imrecv(into->m.data.data() + into->matched, count, MPI_BYTE, &handle, &req));
    into->matched += static_cast<size_t>(count);
    ++into->in_flight;
    recv_reqs_.push_back(req);
    recv_for_.push_back(into);
  }
}

// Retires completed receives and moves every complete message at the front of a source's queue to
// the ready list.
void MpiTransport::complete_receives() {
  if (!recv_reqs_.empty()) {
    std::vector<int> done(recv_reqs_.size());
    int n = 0;
    SFB_MPI_CALL(
        MPI_Testsome(static_cast<int>(recv_reqs_.size()), recv_reqs_.data(), &n, done.data(), MPI_STATUSES_IGNORE));
    for (int i = 0; i < n && n != MPI_UNDEFINED; ++i)
      --recv_for_[static_cast<size_t>(done[static_cast<size_t>(i)])]->in_flight;
    size_t k = 0;
    for (size_t i = 0; i < recv_reqs_.size(); ++i)
      if (recv_reqs_[i] != MPI_REQUEST_NULL) {
        recv_reqs_[k] = recv_reqs_[i];
        recv_for_[k++] = recv_for_[i];
      }
    recv_reqs_.resize(k);
    recv_for_.resize(k);
  }
  for (auto& q : incoming_)
    while (!q.empty() && q.front().known && q.front().in_flight == 0 && q.front().matched == q.front().m.data.size()) {
      ready_.push_back(std::move(q.front().m));
      q.pop_front();
    }
}

std::optional<Message> MpiTransport::poll() {
  {
    std::lock_guard lock(pending_mu_);
    progress_sends_locked();
  }
  match_arrivals();
  complete_receives();
  if (ready_.empty()) return std::nullopt;
  Message m = std::move(ready_.front());
  ready_.pop_front();
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
      progress_sends_locked();
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
