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

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "sfb/comm/transport/tcp_connect.h"
#include "sfb/comm/transport/tcp_handshake.h"
#include "sfb/core/crypto.h"
#include "testing/rank_threads.h"

namespace sfb::testing {

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
  static int dial(const comm::tcp::Listener& l) {
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
      secure_random(finish);
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

// A ThreadBootstrap that lets the intruder in once the listeners are known and before any rank
// goes on to connect.
class IntrudedBootstrap {
 public:
  IntrudedBootstrap(int n, Intruder& intruder) : inner_(n), intruder_(intruder) {}
  comm::Bootstrap for_rank(int r) {
    auto inner = inner_.for_rank(r);
    return {r, inner.size, [this, inner](const Bytes& mine) {
              auto all = inner.allgather(mine);
              if (comm::tcp::peek_endpoint(all[0])) {
                std::call_once(once_, [&] {
                  std::vector<std::vector<comm::tcp::Listener>> eps;
                  for (const auto& m : all) eps.push_back(*comm::tcp::peek_endpoint(m));
                  intruder_.attack(eps);
                });
              }
              return all;
            }};
  }

 private:
  ThreadBootstrap inner_;
  Intruder& intruder_;
  std::once_flag once_;
};

}  // namespace sfb::testing
