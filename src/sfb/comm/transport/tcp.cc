#include "sfb/comm/transport/tcp.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sfb/comm/transport/tcp_connect.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/timer.h"

namespace sfb::comm {

namespace {

constexpr uint32_t kFrameMagic = 0x54424653;  // "SFBT"
constexpr size_t kHeadBytes = 16;
constexpr Tag kTagBarrier = -2;  // internal: the barrier's tokens, never delivered
constexpr size_t kStageBytes = 64 << 10;
constexpr size_t kReadBudget = 4 << 20;  // bytes read from one peer before the others get a turn
constexpr uint32_t kWakeId = UINT32_MAX;

using Head = std::array<std::byte, kHeadBytes>;

Head encode_head(Tag tag, uint64_t length) {
  Head h;
  std::memcpy(h.data(), &kFrameMagic, 4);
  std::memcpy(h.data() + 4, &tag, 4);
  std::memcpy(h.data() + 8, &length, 8);
  return h;
}

}  // namespace

struct TcpTransport::Peer {
  int rank = -1;
  tcp::Fd fd;
  std::string route;

  struct Out {
    Head head;
    SharedBytes data;
    size_t done = 0;  // bytes of head + data written
  };
  std::mutex mu;  // out, interest, error
  std::deque<Out> out;
  std::atomic<bool> reading{true};  // EPOLLIN wanted (false while too much is unpolled)
  uint32_t interest = 0;
  std::string error;
  std::atomic<bool> gone{false};  // closed by the peer, at a message boundary, or broken

  // Receive state, under read_mu: the I/O thread reads, and so does a polling receiver that finds
  // nothing delivered (it saves the wake-up of the I/O thread on the latency path).
  std::mutex read_mu;
  Head head{};
  size_t head_got = 0;
  bool in_body = false;
  Message cur;
  size_t body_got = 0;
  std::vector<std::byte> stage = std::vector<std::byte>(kStageBytes);
  size_t stage_begin = 0, stage_end = 0;
};

TcpTransport::TcpTransport(const Bootstrap& boot, const TcpOptions& opt)
    : rank_(boot.rank), size_(boot.size), opt_(opt) {
  SFB_ENFORCE(size_ >= 1 && rank_ >= 0 && rank_ < size_, "rank {} of {}", rank_, size_);
  init_counters(size_);
  bar_seen_.assign(static_cast<size_t>(size_), 0);
  limit_.store(opt_.max_unpolled_bytes);
  tcp::Mesh mesh = tcp::connect_mesh(boot, opt_);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) throw CommError(fmt::format("epoll/eventfd: {}", std::strerror(errno)));
  epoll_event wev{};
  wev.events = EPOLLIN;
  wev.data.u32 = kWakeId;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wev);
  peers_.resize(static_cast<size_t>(size_));
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    auto p = std::make_unique<Peer>();
    p->rank = q;
    p->fd = std::move(mesh.fds[static_cast<size_t>(q)]);
    p->route = mesh.routes[static_cast<size_t>(q)];
    p->interest = EPOLLIN;
    epoll_event ev{};
    ev.events = p->interest;
    ev.data.u32 = static_cast<uint32_t>(q);
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, p->fd.get(), &ev) != 0)
      throw CommError(fmt::format("epoll_ctl: {}", std::strerror(errno)));
    peers_[static_cast<size_t>(q)] = std::move(p);
  }
  io_ = std::thread([this] { io_loop(); });
  io_clock_ok_ = ::pthread_getcpuclockid(io_.native_handle(), &io_clock_) == 0;
}

double TcpTransport::own_threads_cpu_seconds() const { return io_clock_ok_ ? cpu_clock_seconds(io_clock_) : 0.0; }

TcpTransport::~TcpTransport() {
  try {
    flush();
  } catch (const std::exception& e) {
    spdlog::warn("rank {}: closing the TCP transport: {}", rank_, e.what());
  }
  close_gracefully();
  stop_.store(true);
  const uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof(one));
  if (io_.joinable()) io_.join();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

// Half-closes every connection and waits (bounded) until each peer has closed its side too, so no
// byte either side sent is lost to a reset; unread messages are dropped.
void TcpTransport::close_gracefully() {
  limit_.store(INT64_MAX);
  resume_reading();
  // Our side closes whether or not the peer has closed its side already (it waits for our EOF).
  for (auto& p : peers_)
    if (p) ::shutdown(p->fd.get(), SHUT_WR);
  const auto deadline = deadline_after(std::min(peer_timeout_s(), 30.0));
  std::unique_lock lock(rq_mu_);
  rq_cv_.wait_until(lock, deadline, [&] {
    for (auto& p : peers_)
      if (p && !p->gone.load()) return false;
    return true;
  });
}

void TcpTransport::wake_io() {
  const uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof(one));
}

void TcpTransport::arm_locked(Peer& p) {
  const uint32_t want = (p.reading ? EPOLLIN : 0u) | (p.out.empty() ? 0u : EPOLLOUT);
  if (want == p.interest || p.gone.load()) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u32 = static_cast<uint32_t>(p.rank);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, p.fd.get(), &ev);
  p.interest = want;
}

void TcpTransport::enqueue(int dst, Tag tag, SharedBytes data) {
  if (dst == rank_) {
    deliver(Message{rank_, tag, Bytes(data->begin(), data->end())});
    return;
  }
  Peer& p = *peers_[static_cast<size_t>(dst)];
  std::lock_guard lock(p.mu);
  if (!p.error.empty()) throw CommError(fmt::format("rank {}: send to rank {}: {}", rank_, dst, p.error));
  if (p.gone.load())
    throw CommError(fmt::format("rank {}: send to rank {}, which has closed its connection ({})", rank_, dst, p.route));
  const bool was_empty = p.out.empty();
  p.out.push_back({encode_head(tag, data->size()), std::move(data), 0});
  {
    std::lock_guard olock(out_mu_);
    ++queued_sends_;
  }
  // An idle connection is written at once by the caller; the I/O thread writes what does not fit.
  if (was_empty) write_some_locked(p);
  arm_locked(p);
}

void TcpTransport::do_send(int dst, Tag tag, SharedBytes data) { enqueue(dst, tag, std::move(data)); }

// Writes queued messages until the socket is full or the queue is empty.
void TcpTransport::write_some_locked(Peer& p) {
  int64_t finished = 0;
  while (!p.out.empty()) {
    std::array<iovec, 64> iov;
    size_t n = 0;
    for (auto it = p.out.begin(); it != p.out.end() && n + 2 <= iov.size(); ++it) {
      size_t skip = it->done;
      if (skip < kHeadBytes) {
        iov[n++] = {it->head.data() + skip, kHeadBytes - skip};
        skip = 0;
      } else {
        skip -= kHeadBytes;
      }
      if (it->data->size() > skip)
        iov[n++] = {const_cast<std::byte*>(it->data->data()) + skip, it->data->size() - skip};
    }
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = n;
    const ssize_t k = ::sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      const std::string why = fmt::format("connection {} broke while sending: {}", p.route, std::strerror(errno));
      finished += static_cast<int64_t>(p.out.size());
      p.out.clear();
      p.error = why;
      break;
    }
    auto left = static_cast<size_t>(k);
    while (left > 0 || (!p.out.empty() && p.out.front().done == kHeadBytes + p.out.front().data->size())) {
      Peer::Out& o = p.out.front();
      const size_t need = kHeadBytes + o.data->size() - o.done;
      const size_t take = std::min(need, left);
      o.done += take;
      left -= take;
      if (o.done < kHeadBytes + o.data->size()) break;
      p.out.pop_front();
      ++finished;
    }
  }
  if (finished > 0) {
    std::lock_guard olock(out_mu_);
    queued_sends_ -= finished;
    if (queued_sends_ == 0) out_cv_.notify_all();
  }
  if (!p.error.empty()) fail_peer_locked(p, p.error);
}

void TcpTransport::on_writable(Peer& p) {
  std::lock_guard lock(p.mu);
  write_some_locked(p);
  arm_locked(p);
}

void TcpTransport::deliver(Message m) {
  std::lock_guard lock(rq_mu_);
  rq_bytes_ += static_cast<int64_t>(m.data.size());
  rq_.push_back(std::move(m));
  rq_cv_.notify_all();
}

// A broken connection: pending sends to the peer are dropped and poll() reports it.
void TcpTransport::fail_peer_locked(Peer& p, const std::string& why) {
  if (p.error.empty()) p.error = why;
  const auto dropped = static_cast<int64_t>(p.out.size());
  p.out.clear();
  if (dropped > 0) {
    std::lock_guard olock(out_mu_);
    queued_sends_ -= dropped;
    if (queued_sends_ == 0) out_cv_.notify_all();
  }
  if (!p.gone.exchange(true)) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, p.fd.get(), nullptr);
  std::lock_guard lock(rq_mu_);
  if (error_.empty() && !stop_.load() && limit_.load() != INT64_MAX)
    error_ = fmt::format("rank {}: connection to rank {} ({}): {}", rank_, p.rank, p.route, p.error);
  rq_cv_.notify_all();
}

// The peer closed its side at a message boundary: nothing more will come from it.
void TcpTransport::peer_closed(Peer& p) {
  std::lock_guard lock(p.mu);
  if (!p.gone.exchange(true)) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, p.fd.get(), nullptr);
  std::lock_guard rlock(rq_mu_);
  rq_cv_.notify_all();
}

// Pauses reading from p when too much is unpolled; false (reading goes on) otherwise. The check and
// the pause happen under p.mu and rq_mu_ together (the lock order fail_peer_locked uses): a poll()
// that drains the queue either comes first (nothing to pause) or finds reading_paused_ set and
// resumes p after it. Deciding under rq_mu_ alone and pausing p later lost that resume when the
// poll fell in between: p stayed paused with nothing left to wake it (a hang under the bound).
bool TcpTransport::pause_if_full(Peer& p) {
  {
    std::lock_guard rlock(rq_mu_);
    if (rq_bytes_ < limit_.load()) return false;
  }
  std::lock_guard lock(p.mu);
  std::lock_guard rlock(rq_mu_);
  if (rq_bytes_ < limit_.load()) return false;
  reading_paused_ = true;
  p.reading = false;
  arm_locked(p);
  return true;
}

void TcpTransport::resume_reading() {
  for (auto& p : peers_) {
    if (!p) continue;
    std::lock_guard lock(p->mu);
    p->reading = true;
    arm_locked(*p);
  }
  wake_io();  // the I/O thread parses what it has staged
}

// A complete frame of the peer: a message for poll(), or a barrier token.
void TcpTransport::complete(Peer& p) {
  p.in_body = false;
  if (p.cur.tag == kTagBarrier) {
    int64_t gen = 0;
    std::memcpy(&gen, p.cur.data.data(), sizeof(gen));
    std::lock_guard lock(bar_mu_);
    bar_seen_[static_cast<size_t>(p.rank)] = std::max(bar_seen_[static_cast<size_t>(p.rank)], gen);
    bar_cv_.notify_all();
    return;
  }
  deliver(std::move(p.cur));
}

// Checks a frame head and allocates its message; false (after failing the peer) when it is bad.
bool TcpTransport::start_frame(Peer& p) {
  uint32_t magic = 0;
  Tag tag = 0;
  uint64_t length = 0;
  std::memcpy(&magic, p.head.data(), 4);
  std::memcpy(&tag, p.head.data() + 4, 4);
  std::memcpy(&length, p.head.data() + 8, 8);
  p.head_got = 0;
  std::string bad;
  if (magic != kFrameMagic)
    bad = fmt::format("bad frame magic 0x{:08x}: not an sfb TCP stream, or the stream lost its place", magic);
  else if ((tag < 0 || tag > kMaxTag) && tag != kTagBarrier)
    bad = fmt::format("frame with tag {}", tag);
  else if (length > static_cast<uint64_t>(opt_.max_message_bytes) || (tag == kTagBarrier && length != 8))
    bad = fmt::format("frame of tag {} announces {} bytes (at most {})", tag, length, opt_.max_message_bytes);
  if (!bad.empty()) {
    std::lock_guard lock(p.mu);
    fail_peer_locked(p, bad);
    return false;
  }
  p.cur = Message{p.rank, tag, Bytes(static_cast<size_t>(length))};
  p.body_got = 0;
  p.in_body = true;
  if (length == 0) complete(p);
  return true;
}

// Reads into the stage buffer; false when nothing more can be read now (EAGAIN, EOF, error).
bool TcpTransport::refill(Peer& p, bool& eof) {
  if (p.stage_begin == p.stage_end) p.stage_begin = p.stage_end = 0;
  const ssize_t k = ::recv(p.fd.get(), p.stage.data() + p.stage_end, p.stage.size() - p.stage_end, 0);
  if (k > 0) {
    p.stage_end += static_cast<size_t>(k);
    return true;
  }
  if (k == 0) eof = true;
  if (k < 0 && errno == EINTR) return true;
  if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
    std::lock_guard lock(p.mu);
    fail_peer_locked(p, fmt::format("receive failed: {}", std::strerror(errno)));
  }
  return false;
}

// Parses and reads frames of one peer until its socket is drained, the read budget is spent, or
// reading pauses because too much is unpolled.
void TcpTransport::on_readable(Peer& p, bool hangup) {
  size_t budget = kReadBudget;
  bool eof = false;
  while (budget > 0 && !p.gone.load()) {
    size_t staged = p.stage_end - p.stage_begin;
    if (!p.in_body) {
      if (p.head_got == 0 && !hangup && pause_if_full(p)) return;
      const size_t take = std::min(staged, kHeadBytes - p.head_got);
      std::memcpy(p.head.data() + p.head_got, p.stage.data() + p.stage_begin, take);
      p.stage_begin += take;
      p.head_got += take;
      if (p.head_got == kHeadBytes) {
        if (!start_frame(p)) return;
        continue;
      }
    } else {
      const size_t want = p.cur.data.size() - p.body_got;
      const size_t take = std::min(staged, want);
      std::memcpy(p.cur.data.data() + p.body_got, p.stage.data() + p.stage_begin, take);
      p.stage_begin += take;
      p.body_got += take;
      if (p.body_got == p.cur.data.size()) {
        complete(p);
        continue;
      }
      if (want - take >= kStageBytes / 4) {
        // Large bodies go straight from the socket into the message.
        const ssize_t k = ::recv(p.fd.get(), p.cur.data.data() + p.body_got, want - take, 0);
        if (k > 0) {
          p.body_got += static_cast<size_t>(k);
          budget -= std::min(budget, static_cast<size_t>(k));
          if (p.body_got == p.cur.data.size()) complete(p);
          continue;
        }
        if (k == 0) eof = true;
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
          std::lock_guard lock(p.mu);
          fail_peer_locked(p, fmt::format("receive failed: {}", std::strerror(errno)));
        }
        break;
      }
    }
    if (p.stage_begin < p.stage_end) continue;
    if (!refill(p, eof)) break;
    budget -= std::min(budget, p.stage_end - p.stage_begin);
  }
  if (!eof || p.gone.load()) return;
  if (p.in_body || p.head_got > 0 || p.stage_begin < p.stage_end) {
    std::lock_guard lock(p.mu);
    fail_peer_locked(p, p.in_body ? fmt::format("closed by the peer mid-message ({} of {} bytes of a {} message)",
                                                p.body_got, p.cur.data.size(), tag_name(p.cur.tag))
                                  : std::string("closed by the peer mid-frame"));
    return;
  }
  peer_closed(p);
}

void TcpTransport::io_loop() {
  std::array<epoll_event, 64> evs;
  while (!stop_.load()) {
    const int n = ::epoll_wait(epoll_fd_, evs.data(), static_cast<int>(evs.size()), 200);
    if (n < 0 && errno != EINTR) {
      std::lock_guard lock(rq_mu_);
      if (error_.empty()) error_ = fmt::format("rank {}: epoll_wait: {}", rank_, std::strerror(errno));
      rq_cv_.notify_all();
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint32_t id = evs[static_cast<size_t>(i)].data.u32;
      const uint32_t e = evs[static_cast<size_t>(i)].events;
      if (id == kWakeId) {
        uint64_t v = 0;
        [[maybe_unused]] const auto r = ::read(wake_fd_, &v, sizeof(v));
        for (auto& p : peers_) {
          if (!p || !p->reading || p->gone.load()) continue;
          std::lock_guard lock(p->read_mu);
          on_readable(*p, false);
        }
        continue;
      }
      Peer& p = *peers_[id];
      if (e & EPOLLOUT) on_writable(p);
      if (e & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        std::lock_guard lock(p.read_mu);
        on_readable(p, (e & (EPOLLERR | EPOLLHUP)) != 0);
      }
    }
  }
}

// What has arrived on any socket, read by this (receiving) thread, unless the I/O thread is at it.
void TcpTransport::read_inline() {
  for (auto& p : peers_) {
    if (!p || !p->reading || p->gone.load() || !p->read_mu.try_lock()) continue;
    on_readable(*p, false);
    p->read_mu.unlock();
  }
}

bool TcpTransport::nothing_delivered() const {
  std::lock_guard lock(rq_mu_);
  return rq_.empty() && error_.empty();
}

std::optional<Message> TcpTransport::poll() {
  if (nothing_delivered()) read_inline();
  std::optional<Message> m;
  bool resume = false;
  {
    std::lock_guard lock(rq_mu_);
    if (rq_.empty()) {
      if (!error_.empty()) throw CommError(error_);
      return std::nullopt;
    }
    m = std::move(rq_.front());
    rq_.pop_front();
    rq_bytes_ -= static_cast<int64_t>(m->data.size());
    if (reading_paused_ && rq_bytes_ < limit_.load() / 2) {
      reading_paused_ = false;
      resume = true;
    }
  }
  if (resume) resume_reading();
  return m;
}

bool TcpTransport::wait_for_message(SteadyClock::time_point until) {
  // A message that is on its way arrives within microseconds: look for it without sleeping first.
  const auto ready = [this] { return !rq_.empty() || !error_.empty() || woken_; };  // under rq_mu_
  const auto ready_now = [&] {
    std::lock_guard lock(rq_mu_);
    return ready();
  };
  for (int spin = 0; spin < 32 && !ready_now(); ++spin) {
    read_inline();
    std::this_thread::yield();
  }
  std::unique_lock lock(rq_mu_);
  rq_cv_.wait_until(lock, until, ready);
  woken_ = false;
  return true;
}

void TcpTransport::wake() {
  std::lock_guard lock(rq_mu_);
  woken_ = true;
  rq_cv_.notify_all();
}

bool TcpTransport::peer_gone(int peer) const {
  return peer != rank_ && peer >= 0 && peer < size_ && peers_[static_cast<size_t>(peer)]->gone.load();
}

std::string TcpTransport::describe_peer(int peer) const {
  return peer == rank_ ? "self" : peers_.at(static_cast<size_t>(peer))->route;
}

std::vector<int> TcpTransport::pending_destinations() {
  std::vector<int> out;
  for (auto& p : peers_) {
    if (!p) continue;
    std::lock_guard lock(p->mu);
    if (!p->out.empty()) out.push_back(p->rank);
  }
  return out;
}

void TcpTransport::flush() {
  const auto deadline = deadline_after(peer_timeout_s());
  {
    std::unique_lock lock(out_mu_);
    if (out_cv_.wait_until(lock, deadline, [&] { return queued_sends_ == 0; })) return;
  }
  throw CommError(
      fmt::format("rank {}: sends to ranks {} still pending after {} s (runtime.peer_timeout_s): is the peer stopped?",
                  rank_, fmt::join(pending_destinations(), ", "), peer_timeout_s()));
}

// Every rank sends a token of this generation to every other and waits for theirs.
void TcpTransport::barrier() {
  const int64_t gen = ++bar_gen_;
  Bytes b(sizeof(gen));
  std::memcpy(b.data(), &gen, sizeof(gen));
  const auto token = std::make_shared<const Bytes>(std::move(b));
  for (int q = 0; q < size_; ++q)
    if (q != rank_) enqueue(q, kTagBarrier, token);
  const auto deadline = deadline_after(peer_timeout_s());
  std::unique_lock lock(bar_mu_);
  const bool ok = bar_cv_.wait_until(lock, deadline, [&] {
    for (int q = 0; q < size_; ++q)
      if (q != rank_ && bar_seen_[static_cast<size_t>(q)] < gen) return false;
    return true;
  });
  if (ok) return;
  std::vector<int> missing;
  for (int q = 0; q < size_; ++q)
    if (q != rank_ && bar_seen_[static_cast<size_t>(q)] < gen) missing.push_back(q);
  throw CommError(fmt::format("rank {}: barrier: ranks {} did not arrive within {} s (runtime.peer_timeout_s)", rank_,
                              fmt::join(missing, ", "), peer_timeout_s()));
}

void check_interface(const std::string& interface) {
  if (!interface.empty()) tcp::local_addresses(interface);
}

void check_congestion(const std::string& name) {
  if (name.empty()) return;
  const auto where = fmt::format("comm.tcp_congestion = \"{}\"", name);
  const bool word = name.size() < 16 && std::all_of(name.begin(), name.end(), [](char c) {
                      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                    });
  if (!word)
    throw InvalidArgument(fmt::format("{}: not a congestion control's name (lower-case letters, digits, _)", where));
  const tcp::Fd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe) throw CommError(fmt::format("{}: socket: {}", where, std::strerror(errno)));
  if (tcp::set_congestion(probe.get(), name) == 0) return;
  const int err = errno;
  const auto proc = [](const char* key) {
    std::ifstream in(std::string("/proc/sys/net/ipv4/") + key);
    std::string line;
    std::getline(in, line);
    return line;
  };
  throw InvalidArgument(fmt::format("{}: {}; this kernel has {} (a process without CAP_NET_ADMIN may select {})", where,
                                    err == ENOENT  ? "the kernel has no such congestion control loaded"
                                    : err == EPERM ? "not allowed to this process"
                                                   : std::strerror(err),
                                    proc("tcp_available_congestion_control"), proc("tcp_allowed_congestion_control")));
}

std::string TcpTransport::congestion_of(int peer) const {
  if (peer == rank_ || peer < 0 || peer >= size_) return "";
  return tcp::congestion_of(peers_[static_cast<size_t>(peer)]->fd.get());
}

std::string read_secret_file(const std::string& path) {
  const auto where = fmt::format("comm.secret_file = \"{}\"", path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw InvalidArgument(fmt::format("{}: {}", where, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw InvalidArgument(fmt::format("{}: not a regular file", where));
  if ((st.st_mode & 077) != 0)
    throw InvalidArgument(
        fmt::format("{}: readable or writable by group or others (mode {:o}); chmod 600 it", where, st.st_mode & 0777));
  if (st.st_size < 16 || st.st_size > (64 << 10))
    throw InvalidArgument(
        fmt::format("{}: {} bytes; a secret is 16 bytes to 64 KiB (e.g. head -c 32 /dev/urandom)", where, st.st_size));
  const Bytes b = read_file(path, "comm.secret_file", 64 << 10);
  if (b.size() < 16) throw InvalidArgument(fmt::format("{}: {} bytes read", where, b.size()));
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

std::unique_ptr<Transport> make_tcp_transport(const Bootstrap& boot, const TcpOptions& opt) {
  return std::make_unique<TcpTransport>(boot, opt);
}

}  // namespace sfb::comm
