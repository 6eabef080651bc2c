#pragma once
// An intruder at a TCP job's door, for the set-up tests: a bootstrap (IntrudedBootstrap) that,
// once the ranks have exchanged their listeners and before any rank connects, has the Intruder
// open connections to every listener the way an attacker on the network would: idle ones, ones
// that drip a hello a byte at a time, forged handshakes (a valid hello claiming a rank of the job,
// then a finish without the key), and a flood on rank 0. The intruder's connections stay open
// until it is destroyed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "sfb/comm/transport/crypto.h"
#include "sfb/comm/transport/tcp_connect.h"
#include "sfb/comm/transport/tcp_handshake.h"
#include "testing/rank_threads.h"

namespace sfb::testing {

// A blocking connection to `l`; -1 when refused.
inline int dial(const comm::tcp::Listener& l) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = l.addr;
  a.sin_port = htons(l.port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class Intruder {
 public:
  struct Plan {
    int idle_per_listener = 4;
    int slow_per_listener = 2;
    bool forge = true;
    int flood_rank0 = 150;  // idle connections to rank 0 on top (beyond what it handshakes at once)
  };
  explicit Intruder(Plan plan) : plan_(plan) {}
  ~Intruder() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    for (int fd : fds_) ::close(fd);
  }
  // Every rank's listeners, in rank order.
  void attack(const std::vector<std::vector<comm::tcp::Listener>>& eps) {
    const int P = static_cast<int>(eps.size());
    for (int q = 0; q < P; ++q) {
      for (const auto& l : eps[static_cast<size_t>(q)]) {
        if (q == 0)  // first: the oldest connections are the ones a full rank drops
          for (int i = 0; i < plan_.flood_rank0; ++i) keep(dial(l));
        for (int i = 0; i < plan_.idle_per_listener; ++i) keep(dial(l));
        for (int i = 0; i < plan_.slow_per_listener; ++i) drip(dial(l), q, P);
        if (plan_.forge && q < P - 1) forge(dial(l), q, P);
      }
    }
  }
  int forged() const { return forged_.load(); }
  // Forged handshakes the job closed without an acknowledgement.
  int forged_refused() const { return forged_refused_.load(); }

 private:
  void keep(int fd) {
    if (fd < 0) return;
    std::lock_guard lock(mu_);
    fds_.push_back(fd);
  }
  // A hello of the right format, one byte every 300 ms: longer than any per-connection deadline.
  void drip(int fd, int q, int P) {
    if (fd < 0) return;
    keep(fd);
    const Bytes hello = comm::tcp::encode_hello({P - 1, q, comm::tcp::random_nonce()});
    threads_.emplace_back([this, fd, hello] {
      for (size_t i = 0; i < hello.size() && !stop_; ++i) {
        if (::send(fd, hello.data() + i, 1, MSG_NOSIGNAL) != 1) return;
        for (int k = 0; k < 30 && !stop_; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  // A valid hello claiming the highest rank, then a finish of random bytes; counts a refusal when
  // the job closes the connection instead of acknowledging.
  void forge(int fd, int q, int P) {
    if (fd < 0) return;
    keep(fd);
    ++forged_;
    const Bytes hello = comm::tcp::encode_hello({P - 1, q, comm::tcp::random_nonce()});
    if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size())) return;
    threads_.emplace_back([this, fd] {
      Bytes reply(comm::tcp::kReplyBytes);
      if (!read_all(fd, reply)) return;
      Bytes finish(comm::tcp::kFinishBytes);
      comm::secure_random(finish);
      if (::send(fd, finish.data(), finish.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(finish.size())) return;
      Bytes ack(comm::tcp::kAckBytes);
      if (!read_all(fd, ack)) ++forged_refused_;
    });
  }
  bool read_all(int fd, Bytes& b) {
    size_t got = 0;
    while (got < b.size() && !stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t k = ::recv(fd, b.data() + got, b.size() - got, 0);
      if (k <= 0) return false;
      got += static_cast<size_t>(k);
    }
    return got == b.size();
  }

  Plan plan_;
  std::atomic<bool> stop_{false};
  std::atomic<int> forged_{0}, forged_refused_{0};
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
};

// A man in the middle between rank 1 and rank 0: rank 1 is told the proxy's address for rank 0,
// the proxy relays the connection both ways for the whole run (the job trains through it), and
// once rank 1's hello and finish have passed it replays them to rank 0 on a connection of its
// own: rank 0 answers the hello with a fresh nonce, so the recorded finish must be refused.
class ReplayProxy {
 public:
  explicit ReplayProxy(comm::tcp::Listener rank0) : target_(rank0) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(lfd_, 4) != 0 ||
        ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      ADD_FAILURE() << "proxy: cannot listen";
    me_ = {htonl(INADDR_LOOPBACK), ntohs(a.sin_port)};
    relay_ = std::thread([this] { relay(); });
  }
  ~ReplayProxy() {
    stop_ = true;
    relay_.join();
    ::close(lfd_);
  }
  comm::tcp::Listener address() const { return me_; }
  // Blocks until the replay was tried (at most `seconds`); whether rank 0 refused it.
  bool replay_refused(double seconds) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return replayed_; });
    return replayed_ && refused_;
  }

 private:
  static bool exact(int fd, std::byte* b, size_t n, bool write) {
    for (size_t done = 0; done < n;) {
      const ssize_t k = write ? ::send(fd, b + done, n - done, MSG_NOSIGNAL) : ::recv(fd, b + done, n - done, 0);
      if (k <= 0) return false;
      done += static_cast<size_t>(k);
    }
    return true;
  }
  void replay() {
    bool refused = false;
    if (const int fd = dial(target_); fd >= 0) {
      Bytes reply(comm::tcp::kReplyBytes), ack(comm::tcp::kAckBytes);
      Bytes hello(recorded_.begin(), recorded_.begin() + comm::tcp::kHelloBytes);
      Bytes finish(recorded_.begin() + comm::tcp::kHelloBytes, recorded_.end());
      refused = exact(fd, hello.data(), hello.size(), true) && exact(fd, reply.data(), reply.size(), false) &&
                exact(fd, finish.data(), finish.size(), true) && !exact(fd, ack.data(), ack.size(), false);
      ::close(fd);
    }
    std::lock_guard lock(mu_);
    replayed_ = true;
    refused_ = refused;
    cv_.notify_all();
  }
  // Relays rank 1 <-> rank 0 until either side closes; records rank 1's first 64 bytes.
  void relay() {
    pollfd p{lfd_, POLLIN, 0};
    while (!stop_ && ::poll(&p, 1, 100) <= 0) {
    }
    if (stop_) return;
    const int client = ::accept(lfd_, nullptr, nullptr), server = dial(target_);
    if (client < 0 || server < 0) return;
    std::array<std::byte, 1 << 16> buf;
    const size_t want = comm::tcp::kHelloBytes + comm::tcp::kFinishBytes;
    std::array<bool, 2> done{false, false};  // a side closed its sending half: passed on, the other goes on
    while (!(done[0] && done[1]) && !stop_) {
      std::array<pollfd, 2> ps{pollfd{done[0] ? -1 : client, POLLIN, 0}, pollfd{done[1] ? -1 : server, POLLIN, 0}};
      if (::poll(ps.data(), 2, 100) <= 0) continue;
      for (int side = 0; side < 2; ++side) {
        if (done[side] || !ps[side].revents) continue;
        const int from = side == 0 ? client : server, to = side == 0 ? server : client;
        const ssize_t k = ::recv(from, buf.data(), buf.size(), 0);
        if (k <= 0 || !exact(to, buf.data(), static_cast<size_t>(k), true)) {
          ::shutdown(to, SHUT_WR);
          done[side] = true;
          continue;
        }
        if (side == 0 && recorded_.size() < want) {
          recorded_.insert(recorded_.end(), buf.begin(), buf.begin() + std::min<ssize_t>(k, want - recorded_.size()));
          if (recorded_.size() == want) replay();
        }
      }
    }
    ::close(client);
    ::close(server);
  }

  comm::tcp::Listener target_, me_;
  int lfd_ = -1;
  std::atomic<bool> stop_{false};
  Bytes recorded_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool replayed_ = false, refused_ = false;
  std::thread relay_;
};

// A ThreadBootstrap that lets the intruder in once the listeners are known and before any rank
// goes on to connect; with `replay`, rank 1 reaches rank 0 through a ReplayProxy, and the ranks
// above 1 wait until the replay was tried (rank 0 is then still accepting).
class IntrudedBootstrap {
 public:
  IntrudedBootstrap(int n, Intruder& intruder, bool replay = false) : inner_(n), intruder_(intruder), replay_(replay) {}
  comm::Bootstrap for_rank(int r) {
    auto inner = inner_.for_rank(r);
    return {r, inner.size, [this, inner, r](const Bytes& mine) {
              auto all = inner.allgather(mine);
              if (!comm::tcp::peek_endpoint(all[0])) return all;
              std::call_once(once_, [&] {
                std::vector<std::vector<comm::tcp::Listener>> eps;
                for (const auto& m : all) eps.push_back(*comm::tcp::peek_endpoint(m));
                intruder_.attack(eps);
                if (replay_) proxy_ = std::make_unique<ReplayProxy>(eps[0].at(0));
              });
              if (replay_ && r == 1) all[0] = comm::tcp::encode_endpoint({proxy_->address()});
              if (replay_ && r > 1) replay_refused_ = proxy_->replay_refused(20);
              return all;
            }};
  }
  // With `replay`: whether rank 0 refused the replayed hello and finish.
  bool replay_refused() const { return replay_refused_.load(); }

 private:
  ThreadBootstrap inner_;
  Intruder& intruder_;
  const bool replay_;
  std::once_flag once_;
  std::unique_ptr<ReplayProxy> proxy_;
  std::atomic<bool> replay_refused_{false};
};

}  // namespace sfb::testing
