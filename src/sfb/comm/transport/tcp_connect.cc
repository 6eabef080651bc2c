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

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sfb/core/bytes.h"
#include "sfb/core/error.h"
#include "sfb/core/timer.h"

namespace sfb::comm::tcp {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

constexpr uint32_t kEndpointMagic = 0x45544653;  // "SFTE"
constexpr uint32_t kHelloMagic = 0x48544653;     // "SFTH"
constexpr size_t kHelloBytes = 24;

std::string errno_text() { return std::strerror(errno); }

// What an endpoint tells the others: the job's token (rank 0's counts), the network namespace it
// lives in, its port and its addresses.
struct Endpoint {
  uint64_t token = 0;
  std::string netns;
  uint16_t port = 0;
  std::vector<uint32_t> addrs;
};

Bytes encode_endpoint(const Endpoint& e) {
  ByteWriter w;
  w.put<uint32_t>(kEndpointMagic);
  w.put<uint64_t>(e.token);
  w.put<uint32_t>(static_cast<uint32_t>(e.netns.size()));
  w.put_raw(e.netns.data(), e.netns.size());
  w.put<uint16_t>(e.port);
  w.put<uint32_t>(static_cast<uint32_t>(e.addrs.size()));
  w.put_array(std::span<const uint32_t>(e.addrs));
  return w.take();
}

Endpoint decode_endpoint(const Bytes& b, int rank) {
  ByteReader r(b, fmt::format("TCP endpoint of rank {}", rank), ByteReader::Source::kMessage);
  if (r.get<uint32_t>("magic") != kEndpointMagic) r.fail(fmt::format("{}: bad magic", r.what()));
  Endpoint e;
  e.token = r.get<uint64_t>("token");
  const auto n = r.get<uint32_t>("netns length");
  if (n > 4096) r.fail(fmt::format("{}: namespace name of {} bytes", r.what(), n));
  const auto s = r.take(n, "netns");
  e.netns.assign(reinterpret_cast<const char*>(s.data()), s.size());
  e.port = r.get<uint16_t>("port");
  const auto k = r.get<uint32_t>("addresses");
  if (k > 256) r.fail(fmt::format("{}: {} addresses", r.what(), k));
  e.addrs.resize(k);
  r.get_array(e.addrs.data(), k, "addresses");
  r.expect_end();
  return e;
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

// Waits until fd is readable (POLLIN) or writable (POLLOUT); false at the deadline.
bool wait_fd(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    const double left = left_s(deadline);
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min(left * 1000.0, 1000.0)) + 1);
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

Bytes hello(uint64_t token, int from, int to) {
  ByteWriter w(kHelloBytes);
  w.put<uint32_t>(kHelloMagic);
  w.put<uint32_t>(1);  // version
  w.put<uint64_t>(token);
  w.put<int32_t>(from);
  w.put<int32_t>(to);
  return w.take();
}

void send_hello(int fd, uint64_t token, int from, int to, SteadyClock::time_point deadline) {
  Bytes h = hello(token, from, to);
  io_exact(fd, h.data(), h.size(), true, deadline, fmt::format("rank {}: hello to rank {}", from, to));
}

// The peer's rank from its hello; -1 when the hello is not one of this job's for rank `me`.
int read_hello(int fd, uint64_t token, int me, SteadyClock::time_point deadline) {
  Bytes h(kHelloBytes);
  io_exact(fd, h.data(), h.size(), false, deadline, fmt::format("rank {}: hello", me));
  ByteReader r(h, "hello", ByteReader::Source::kMessage);
  const auto magic = r.get<uint32_t>("magic"), version = r.get<uint32_t>("version");
  const auto tok = r.get<uint64_t>("token");
  const auto from = r.get<int32_t>("from"), to = r.get<int32_t>("to");
  if (magic != kHelloMagic || version != 1 || tok != token || to != me) return -1;
  return from;
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

// Rank `me` connects to `peer` (a lower rank), trying its addresses in turn until one answers with
// the right hello; retries refused connections until the deadline.
Fd connect_to(int me, int peer, const Endpoint& e, bool same_netns, uint64_t token, SteadyClock::time_point deadline) {
  std::vector<uint32_t> addrs = e.addrs;
  if (same_netns) addrs.insert(addrs.begin(), htonl(INADDR_LOOPBACK));
  std::vector<std::string> tried;
  Backoff backoff;
  while (left_s(deadline) > 0) {
    for (uint32_t addr : addrs) {
      std::string why;
      const auto attempt = std::min(deadline, deadline_after(std::min(5.0, left_s(deadline))));
      Fd fd = try_connect(addr, e.port, attempt, why);
      if (fd) {
        try {
          send_hello(fd.get(), token, me, peer, attempt);
          if (read_hello(fd.get(), token, me, attempt) == peer) return fd;
          why = "another process answered";
        } catch (const CommError& err) {
          why = err.what();
        }
      }
      tried.push_back(fmt::format("{} ({})", format_endpoint(addr, e.port), why));
    }
    backoff.idle();
    if (tried.size() > 64) tried.erase(tried.begin(), tried.end() - static_cast<ptrdiff_t>(addrs.size()));
  }
  throw CommError(fmt::format(
      "rank {}: cannot connect to rank {} within comm.connect_timeout_s; tried {} (set comm.interface to the "
      "interface the hosts share)",
      me, peer, fmt::join(tried, ", ")));
}

// Rank `me` accepts every higher rank; connections whose hello is not this job's are closed.
void accept_all(int me, int size, int listen_fd, uint64_t token, SteadyClock::time_point deadline, Mesh& mesh) {
  int missing = size - 1 - me;
  while (missing > 0) {
    if (!wait_fd(listen_fd, POLLIN, deadline)) {
      std::vector<int> who;
      for (int q = me + 1; q < size; ++q)
        if (!mesh.fds[static_cast<size_t>(q)]) who.push_back(q);
      throw CommError(
          fmt::format("rank {}: ranks {} did not connect within comm.connect_timeout_s", me, fmt::join(who, ", ")));
    }
    Fd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) continue;
    int from = -1;
    try {
      from = read_hello(fd.get(), token, me, std::min(deadline, deadline_after(10.0)));
    } catch (const CommError& e) {
      spdlog::warn("rank {}: dropped a connection from {}: {}", me, sockname(fd.get(), true), e.what());
      continue;
    }
    if (from <= me || from >= size || mesh.fds[static_cast<size_t>(from)]) {
      spdlog::warn("rank {}: dropped a connection from {} that is not one of this job's ranks", me,
                   sockname(fd.get(), true));
      continue;
    }
    send_hello(fd.get(), token, me, from, deadline);
    mesh.fds[static_cast<size_t>(from)] = std::move(fd);
    --missing;
  }
}

}  // namespace

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

Mesh connect_mesh(const Bootstrap& boot, const TcpOptions& opt) {
  const int me = boot.rank, P = boot.size;
  Mesh mesh;
  mesh.fds.resize(static_cast<size_t>(P));
  mesh.routes.resize(static_cast<size_t>(P));
  if (P == 1) return mesh;
  const auto mine = local_addresses(opt.interface);
  // With comm.interface the listening socket binds that address only (and loopback is not used).
  Fd lfd = listen_socket(opt.interface.empty() ? htonl(INADDR_ANY) : mine.at(0), P);
  Endpoint e;
  e.token = std::random_device{}() * uint64_t{0x9E3779B97F4A7C15} ^ static_cast<uint64_t>(::getpid());
  e.netns = opt.interface.empty() ? netns_id() : std::string("interface:") + opt.interface;
  e.port = port_of(lfd.get());
  e.addrs = mine;
  const auto all = boot.allgather(encode_endpoint(e));
  SFB_ENFORCE(static_cast<int>(all.size()) == P, "bootstrap gave {} endpoints for {} ranks", all.size(), P);
  std::vector<Endpoint> eps;
  for (int q = 0; q < P; ++q) eps.push_back(decode_endpoint(all[static_cast<size_t>(q)], q));
  const uint64_t token = eps[0].token;
  const auto deadline = deadline_after(opt.connect_timeout_s);
  for (int q = 0; q < me; ++q) {
    const bool same = opt.interface.empty() && eps[static_cast<size_t>(q)].netns == e.netns;
    mesh.fds[static_cast<size_t>(q)] = connect_to(me, q, eps[static_cast<size_t>(q)], same, token, deadline);
  }
  accept_all(me, P, lfd.get(), token, deadline, mesh);
  for (int q = 0; q < P; ++q) {
    if (q == me) continue;
    const int fd = mesh.fds[static_cast<size_t>(q)].get();
    set_nodelay(fd);
    mesh.routes[static_cast<size_t>(q)] = fmt::format("{} -> {}", sockname(fd, false), sockname(fd, true));
  }
  return mesh;
}

}  // namespace sfb::comm::tcp
