#include "sfb/comm/transport/tcp_connect.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sfb/comm/transport/tcp_handshake.h"
#include "sfb/core/bytes.h"
#include "sfb/core/error.h"
#include "sfb/core/timer.h"

namespace sfb::comm::tcp {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

constexpr uint32_t kIdentityMagic = 0x49544653;  // "SFTI"
constexpr uint32_t kEndpointMagic = 0x45544653;  // "SFTE"
// An accepted connection has this long to complete its handshake; a connecting rank waits longer
// for its answer, so an acceptor that admitted it has always answered before the connector gives up.
constexpr double kAcceptHandshakeS = 5.0;
constexpr double kConnectAttemptS = 10.0;
// Connections handshaking at once on one rank; beyond it the oldest is dropped (a legitimate
// handshake takes a round trip, so a flood evicts its own idle connections first).
constexpr size_t kMaxPending = 128;

std::string errno_text() { return std::strerror(errno); }

// Set-up's first round: where a rank lives and (rank 0's) the job key.
struct Identity {
  std::string netns;
  JobKey key{};
};

Bytes encode_identity(const Identity& id) {
  ByteWriter w;
  w.put<uint32_t>(kIdentityMagic);
  w.put<uint32_t>(static_cast<uint32_t>(id.netns.size()));
  w.put_raw(id.netns.data(), id.netns.size());
  w.put_array(std::span<const std::byte>(id.key));
  return w.take();
}

Identity decode_identity(const Bytes& b, int rank) {
  ByteReader r(b, fmt::format("TCP identity of rank {}", rank), ByteReader::Source::kMessage);
  if (r.get<uint32_t>("magic") != kIdentityMagic) r.fail(fmt::format("{}: bad magic", r.what()));
  Identity id;
  const auto n = r.get<uint32_t>("netns length");
  if (n > 4096) r.fail(fmt::format("{}: namespace name of {} bytes", r.what(), n));
  const auto s = r.take(n, "netns");
  id.netns.assign(reinterpret_cast<const char*>(s.data()), s.size());
  r.get_array(id.key.data(), id.key.size(), "key");
  r.expect_end();
  return id;
}

}  // namespace

// Set-up's second round: the addresses and ports a rank listens on.
Bytes encode_endpoint(const std::vector<Listener>& ls) {
  ByteWriter w;
  w.put<uint32_t>(kEndpointMagic);
  w.put<uint32_t>(static_cast<uint32_t>(ls.size()));
  for (const auto& l : ls) {
    w.put<uint32_t>(l.addr);
    w.put<uint16_t>(l.port);
  }
  return w.take();
}

namespace {

std::vector<Listener> decode_endpoint(const Bytes& b, int rank) {
  ByteReader r(b, fmt::format("TCP endpoint of rank {}", rank), ByteReader::Source::kMessage);
  if (r.get<uint32_t>("magic") != kEndpointMagic) r.fail(fmt::format("{}: bad magic", r.what()));
  const auto k = r.get<uint32_t>("listeners");
  if (k > 256) r.fail(fmt::format("{}: {} listeners", r.what(), k));
  std::vector<Listener> out(k);
  for (auto& l : out) {
    l.addr = r.get<uint32_t>("address");
    l.port = r.get<uint16_t>("port");
  }
  r.expect_end();
  return out;
}

// Ranks in one network namespace of one boot reach each other over loopback.
std::string netns_id() {
  char link[256] = {};
  const ssize_t n = ::readlink("/proc/self/ns/net", link, sizeof(link) - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return fmt::format("{}|{}|{}", n > 0 ? std::string(link, static_cast<size_t>(n)) : "?", boot, host);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

double left_s(SteadyClock::time_point deadline) {
  return std::chrono::duration<double>(deadline - SteadyClock::now()).count();
}

int poll_ms(double seconds) { return static_cast<int>(std::clamp(seconds, 0.0, 1.0) * 1000.0) + 1; }

// Waits until fd is readable (POLLIN) or writable (POLLOUT); false at the deadline.
bool wait_fd(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    const double left = left_s(deadline);
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, poll_ms(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) throw CommError(fmt::format("poll: {}", errno_text()));
  }
}

// Blocking-style I/O of exactly n bytes on a non-blocking socket, bounded by the deadline.
void io_exact(int fd, std::byte* buf, size_t n, bool write, SteadyClock::time_point deadline, const std::string& what) {
  size_t done = 0;
  while (done < n) {
    const ssize_t k = write ? ::send(fd, buf + done, n - done, MSG_NOSIGNAL) : ::recv(fd, buf + done, n - done, 0);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) throw CommError(fmt::format("{}: connection closed by the peer", what));
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw CommError(fmt::format("{}: {}", what, errno_text()));
    if (!wait_fd(fd, write ? POLLOUT : POLLIN, deadline)) throw CommError(fmt::format("{}: timed out", what));
  }
}

// Writes all of a small message (a handshake's) without waiting: false if the socket takes less.
bool send_now(int fd, const Bytes& b) {
  const ssize_t k = ::send(fd, b.data(), b.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return k == static_cast<ssize_t>(b.size());
}

std::string sockname(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if ((peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
            : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len)) != 0)
    return "?";
  return format_endpoint(a.sin_addr.s_addr, ntohs(a.sin_port));
}

Fd listen_socket(uint32_t bind_addr, int backlog) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw CommError(fmt::format("socket: {}", errno_text()));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = bind_addr;
  a.sin_port = 0;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
    throw CommError(fmt::format("bind {}: {}", format_endpoint(bind_addr, 0), errno_text()));
  if (::listen(fd.get(), backlog) != 0) throw CommError(fmt::format("listen: {}", errno_text()));
  return fd;
}

uint16_t port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// One non-blocking connect attempt; an empty Fd when it fails or times out.
Fd try_connect(uint32_t addr, uint16_t port, SteadyClock::time_point deadline, std::string& why) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw CommError(fmt::format("socket: {}", errno_text()));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = addr;
  a.sin_port = htons(port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (errno != EINPROGRESS) {
      why = errno_text();
      return {};
    }
    if (!wait_fd(fd.get(), POLLOUT, deadline)) {
      why = "timed out";
      return {};
    }
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      why = std::strerror(err);
      return {};
    }
  }
  return fd;
}

// The connector's side of the handshake; false (and why) when the other end is not rank `peer` of
// this job.
bool handshake(int fd, int me, int peer, const JobKey& key, SteadyClock::time_point deadline, std::string& why) {
  Hello h;
  h.from = me;
  h.to = peer;
  h.nonce = random_nonce();
  Bytes hello = encode_hello(h);
  const auto what = fmt::format("rank {}: handshake with rank {}", me, peer);
  io_exact(fd, hello.data(), hello.size(), true, deadline, what);
  Bytes reply(kReplyBytes);
  io_exact(fd, reply.data(), reply.size(), false, deadline, what);
  const auto nonce_a = check_reply(key, h, reply);
  if (!nonce_a) {
    why = "the answer does not prove this job's key (another process, or another comm.secret_file)";
    return false;
  }
  Bytes finish = encode_finish(key, h, *nonce_a);
  io_exact(fd, finish.data(), finish.size(), true, deadline, what);
  Bytes ack(kAckBytes);
  io_exact(fd, ack.data(), ack.size(), false, deadline, what);
  if (!check_ack(ack)) {
    why = "no acknowledgement";
    return false;
  }
  return true;
}

// The host part of "a.b.c.d:port" (refusals are counted per address, not per port).
std::string host_of(const std::string& endpoint) { return endpoint.substr(0, endpoint.rfind(':')); }

// Connections a rank refused during set-up, per address: the first from each address is logged
// with its reason, the rest counted; a set-up that fails names them all.
class Refusals {
 public:
  explicit Refusals(int me) : me_(me) {}
  void add(const std::string& from, const std::string& why) {
    auto& e = by_host_[host_of(from)];
    if (e.count++ == 0) {
      e.why = why;
      spdlog::warn("rank {}: refused a connection from {}: {} (more from {} are counted, not logged)", me_, from, why,
                   host_of(from));
    }
  }
  bool empty() const { return by_host_.empty(); }
  std::string describe() const {
    std::vector<std::string> parts;
    for (const auto& [host, e] : by_host_) parts.push_back(fmt::format("{} ({} x, first: {})", host, e.count, e.why));
    return fmt::format("{}", fmt::join(parts, "; "));
  }

 private:
  struct Entry {
    int64_t count = 0;
    std::string why;
  };
  int me_;
  std::map<std::string, Entry> by_host_;
};

// One accepted connection on its way through the handshake.
struct Incoming {
  Fd fd;
  std::string from;  // the peer's address
  SteadyClock::time_point deadline;
  Bytes buf = Bytes(kHelloBytes);
  size_t got = 0;
  std::optional<Hello> hello;  // set once the hello is in; then buf collects the finish
  Nonce nonce{};
};

// Accepts the ranks above `me` on every listener at once: each connection runs its own handshake
// with its own deadline, so idle, slow or hostile connections hold up nobody (tcp_handshake.h).
class Acceptor {
 public:
  Acceptor(int me, int size, const JobKey& key, std::vector<Fd>& listeners, Mesh& mesh)
      : me_(me), size_(size), key_(key), listeners_(listeners), mesh_(mesh), refusals_(me) {}
  // Until every rank above `me` is connected; CommError at the deadline naming the missing ranks
  // and the addresses refused.
  void run(SteadyClock::time_point deadline);

 private:
  std::vector<int> missing() const {  // the ranks above `me` not connected yet
    std::vector<int> who;
    for (int q = me_ + 1; q < size_; ++q)
      if (!mesh_.fds[static_cast<size_t>(q)]) who.push_back(q);
    return who;
  }
  void accept_new(int lfd);
  bool advance(Incoming& c);  // true when the connection is done with (admitted or refused)
  bool on_hello(Incoming& c);
  bool on_finish(Incoming& c);
  bool refuse(Incoming& c, const std::string& why) {
    refusals_.add(c.from, why);
    return true;
  }
  [[noreturn]] void fail();

  int me_, size_;
  const JobKey& key_;
  std::vector<Fd>& listeners_;
  Mesh& mesh_;
  Refusals refusals_;
  std::vector<Incoming> pending_;
};

void Acceptor::run(SteadyClock::time_point deadline) {
  while (!missing().empty()) {
    if (left_s(deadline) <= 0) fail();
    std::vector<pollfd> pfds;
    for (auto& l : listeners_) pfds.push_back({l.get(), POLLIN, 0});
    double wait = left_s(deadline);
    for (auto& c : pending_) {
      pfds.push_back({c.fd.get(), POLLIN, 0});
      wait = std::min(wait, left_s(c.deadline));
    }
    const int n = ::poll(pfds.data(), pfds.size(), poll_ms(wait));
    if (n < 0 && errno != EINTR) throw CommError(fmt::format("rank {}: poll: {}", me_, errno_text()));
    const size_t nl = listeners_.size();
    std::vector<bool> done(pending_.size(), false);
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (pfds[nl + i].revents != 0) {
        done[i] = advance(pending_[i]);
      } else if (left_s(pending_[i].deadline) <= 0) {
        done[i] = refuse(pending_[i], fmt::format("no complete handshake within {} s", kAcceptHandshakeS));
      }
    }
    for (size_t i = pending_.size(); i-- > 0;)
      if (done[i]) pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
    for (size_t i = 0; i < nl; ++i)
      if (pfds[i].revents != 0) accept_new(listeners_[i].get());
  }
  if (!refusals_.empty()) spdlog::info("rank {}: set-up refused connections from {}", me_, refusals_.describe());
}

void Acceptor::accept_new(int lfd) {
  for (;;) {
    Fd fd(::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) return;  // EAGAIN: none left (other errors: the peer went away before we took it)
    if (pending_.size() >= kMaxPending) {
      refuse(pending_.front(), fmt::format("dropped: {} connections were handshaking at once", kMaxPending));
      pending_.erase(pending_.begin());
    }
    Incoming c;
    c.from = sockname(fd.get(), true);
    c.fd = std::move(fd);
    c.deadline = deadline_after(kAcceptHandshakeS);
    pending_.push_back(std::move(c));
  }
}

bool Acceptor::advance(Incoming& c) {
  const ssize_t k = ::recv(c.fd.get(), c.buf.data() + c.got, c.buf.size() - c.got, 0);
  if (k == 0) return refuse(c, c.got == 0 && !c.hello ? "closed without a hello" : "closed mid-handshake");
  if (k < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    return refuse(c, errno_text());
  }
  c.got += static_cast<size_t>(k);
  if (c.got < c.buf.size()) return false;
  return c.hello ? on_finish(c) : on_hello(c);
}

bool Acceptor::on_hello(Incoming& c) {
  const auto h = decode_hello(c.buf);
  if (!h) return refuse(c, "not an sfb hello of this version");
  if (h->to != me_ || h->from <= me_ || h->from >= size_)
    return refuse(c, fmt::format("a hello from rank {} to rank {}: not a rank that connects to rank {} of {}", h->from,
                                 h->to, me_, size_));
  c.hello = h;
  c.nonce = random_nonce();
  if (!send_now(c.fd.get(), encode_reply(key_, *h, c.nonce))) return refuse(c, "could not take the reply");
  c.buf.assign(kFinishBytes, std::byte{0});
  c.got = 0;
  return false;
}

bool Acceptor::on_finish(Incoming& c) {
  if (!check_finish(key_, *c.hello, c.nonce, c.buf))
    return refuse(
        c, fmt::format("claimed rank {} without this job's key (another job, a replay or a forgery)", c.hello->from));
  if (!send_now(c.fd.get(), encode_ack())) return refuse(c, "could not take the acknowledgement");
  // A rank that gave up waiting for an earlier acknowledgement connects again: the newer wins.
  mesh_.fds[static_cast<size_t>(c.hello->from)] = std::move(c.fd);
  return true;
}

void Acceptor::fail() {
  throw CommError(fmt::format(
      "rank {}: ranks {} did not connect within runtime.peer_timeout_s{}", me_, fmt::join(missing(), ", "),
      refusals_.empty() ? std::string() : fmt::format("; connections refused meanwhile: {}", refusals_.describe())));
}

// Rank `me` connects to `peer` (a lower rank), trying its listeners in turn until one completes the
// handshake; retries until the deadline.
Fd connect_to(int me, int peer, const std::vector<Listener>& to, const JobKey& key, SteadyClock::time_point deadline) {
  std::vector<std::string> tried;
  double pause_s = 0.02;  // between rounds of attempts, doubling to 1 s: a refusing peer is not hammered
  while (left_s(deadline) > 0) {
    for (const auto& l : to) {
      std::string why;
      const auto attempt = std::min(deadline, deadline_after(kConnectAttemptS));
      Fd fd = try_connect(l.addr, l.port, attempt, why);
      if (fd) {
        try {
          if (handshake(fd.get(), me, peer, key, attempt, why)) return fd;
        } catch (const CommError& err) {
          why = err.what();
        }
      }
      tried.push_back(fmt::format("{} ({})", format_endpoint(l.addr, l.port), why));
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(pause_s, std::max(0.0, left_s(deadline)))));
    pause_s = std::min(1.0, pause_s * 2);
    if (tried.size() > 64) tried.erase(tried.begin(), tried.end() - static_cast<ptrdiff_t>(to.size()));
  }
  throw CommError(fmt::format(
      "rank {}: cannot connect to rank {} within runtime.peer_timeout_s; tried {} (set comm.interface to the "
      "interface the hosts share; every rank must read the same comm.secret_file)",
      me, peer, fmt::join(tried, ", ")));
}

// Where this rank listens: comm.interface's address; else loopback for ranks in this network
// namespace and this host's other addresses for ranks elsewhere (never 0.0.0.0).
std::vector<uint32_t> bind_addresses(int me, const std::vector<Identity>& ids, const TcpOptions& opt,
                                     const std::vector<uint32_t>& mine) {
  if (!opt.interface.empty()) return {mine.at(0)};
  bool local = false, remote = false;
  for (size_t q = 0; q < ids.size(); ++q)
    if (static_cast<int>(q) != me) (ids[q].netns == ids[static_cast<size_t>(me)].netns ? local : remote) = true;
  std::vector<uint32_t> out;
  if (local) out.push_back(htonl(INADDR_LOOPBACK));
  if (remote) {
    if (mine.empty())
      throw CommError(
          fmt::format("rank {}: ranks run on other hosts but this host has no up IPv4 interface besides "
                      "loopback (set comm.interface)",
                      me));
    out.insert(out.end(), mine.begin(), mine.end());
  }
  return out;
}

// The listeners of `peer` this rank may use: loopback within one namespace, the others across.
std::vector<Listener> routes_to(int peer, const std::vector<Listener>& theirs, bool same_netns) {
  std::vector<Listener> out;
  for (const auto& l : theirs)
    if ((l.addr == htonl(INADDR_LOOPBACK)) == same_netns) out.push_back(l);
  if (out.empty()) out = theirs;  // comm.interface = "127.0.0.1", or a listener list we did not expect
  if (out.empty()) throw CommError(fmt::format("rank {} advertised no address to connect to", peer));
  return out;
}

template <typename Decode>
auto gather_all(const Bootstrap& boot, const Bytes& mine, Decode decode) {
  const auto all = boot.allgather(mine);
  SFB_ENFORCE(static_cast<int>(all.size()) == boot.size, "bootstrap gave {} messages for {} ranks", all.size(),
              boot.size);
  std::vector<decltype(decode(all[0], 0))> out;
  for (int q = 0; q < boot.size; ++q) out.push_back(decode(all[static_cast<size_t>(q)], q));
  return out;
}

// Rank `me` connects to every rank below it while a thread accepts every rank above it.
void connect_pairs(int me, const std::vector<Identity>& ids, const std::vector<std::vector<Listener>>& eps,
                   const JobKey& key, std::vector<Fd>& listeners, const TcpOptions& opt, Mesh& mesh) {
  const int P = static_cast<int>(ids.size());
  const auto deadline = deadline_after(opt.connect_timeout_s);
  std::exception_ptr accept_error;
  std::thread accepting([&] {
    try {
      Acceptor(me, P, key, listeners, mesh).run(deadline);
    } catch (...) {
      accept_error = std::current_exception();
    }
  });
  std::exception_ptr connect_error;
  try {
    for (int q = 0; q < me; ++q) {
      const bool same =
          opt.interface.empty() && ids[static_cast<size_t>(q)].netns == ids[static_cast<size_t>(me)].netns;
      mesh.fds[static_cast<size_t>(q)] =
          connect_to(me, q, routes_to(q, eps[static_cast<size_t>(q)], same), key, deadline);
    }
  } catch (...) {
    connect_error = std::current_exception();
  }
  accepting.join();
  if (connect_error) std::rethrow_exception(connect_error);
  if (accept_error) std::rethrow_exception(accept_error);
}

}  // namespace

std::optional<std::vector<Listener>> peek_endpoint(const Bytes& message) {
  try {
    return decode_endpoint(message, -1);
  } catch (const CommError&) {
    return std::nullopt;
  }
}

std::string format_endpoint(uint32_t addr_be, uint16_t port) {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = addr_be;
  ::inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return fmt::format("{}:{}", buf, port);
}

std::vector<uint32_t> local_addresses(const std::string& interface) {
  in_addr literal{};
  if (!interface.empty() && ::inet_pton(AF_INET, interface.c_str(), &literal) == 1) return {literal.s_addr};
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw CommError(fmt::format("getifaddrs: {}", errno_text()));
  std::vector<uint32_t> out;
  std::vector<std::string> names;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    const uint32_t a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    names.push_back(fmt::format("{} ({})", i->ifa_name, format_endpoint(a, 0)));
    if (interface.empty() ? (i->ifa_flags & IFF_LOOPBACK) == 0 : interface == i->ifa_name) out.push_back(a);
  }
  ::freeifaddrs(list);
  if (!interface.empty() && out.empty())
    throw InvalidArgument(
        fmt::format("comm.interface = \"{}\": no up interface of that name with an IPv4 address here; this host has {}",
                    interface, fmt::join(names, ", ")));
  return out;
}

int set_congestion(int fd, const std::string& name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size()));
}

std::string congestion_of(int fd) {
  char name[32] = {};
  socklen_t len = sizeof(name) - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "";
  return std::string(name, ::strnlen(name, len));
}

Mesh connect_mesh(const Bootstrap& boot, const TcpOptions& opt) {
  const int me = boot.rank, P = boot.size;
  Mesh mesh;
  mesh.fds.resize(static_cast<size_t>(P));
  mesh.routes.resize(static_cast<size_t>(P));
  if (P == 1) return mesh;
  const auto mine = local_addresses(opt.interface);
  Identity id;
  id.netns = opt.interface.empty() ? netns_id() : std::string("interface:") + opt.interface;
  if (me == 0) id.key = random_job_key();
  const auto ids = gather_all(boot, encode_identity(id), decode_identity);
  const JobKey key = mix_secret(ids[0].key, opt.secret);
  std::vector<Fd> listeners;
  std::vector<Listener> advertised;
  for (uint32_t addr : bind_addresses(me, ids, opt, mine)) {
    listeners.push_back(listen_socket(addr, SOMAXCONN));
    advertised.push_back({addr, port_of(listeners.back().get())});
  }
  const auto eps = gather_all(boot, encode_endpoint(advertised), decode_endpoint);
  connect_pairs(me, ids, eps, key, listeners, opt, mesh);
  for (int q = 0; q < P; ++q) {
    if (q == me) continue;
    const int fd = mesh.fds[static_cast<size_t>(q)].get();
    set_nodelay(fd);
    if (!opt.congestion.empty() && set_congestion(fd, opt.congestion) != 0)
      throw CommError(fmt::format("comm.tcp_congestion = \"{}\" on the connection to rank {}: {}", opt.congestion, q,
                                  std::strerror(errno)));
    mesh.routes[static_cast<size_t>(q)] = fmt::format("{} -> {}", sockname(fd, false), sockname(fd, true));
  }
  return mesh;
}

}  // namespace sfb::comm::tcp
