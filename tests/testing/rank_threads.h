#pragma once
// Runs N ranks as threads of this process, over the in-process transport (run_ranks) or over real
// TCP sockets on loopback (run_tcp_ranks, make_tcp_group); rethrows the first rank's exception
// after every thread has been joined.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sfb/comm/transport.h"
#include "sfb/comm/transport/tcp.h"
#include "sfb/core/thread_group.h"

namespace sfb::testing {

template <typename Fn>
void run_ranks(int n, Fn fn) {
  auto group = comm::make_inproc_group(n);
  ThreadGroup threads;
  for (int r = 0; r < n; ++r) threads.spawn([&fn, t = group[static_cast<size_t>(r)].get()] { fn(*t); });
  threads.join();
}

// The bootstrap of N threads: an all-gather through shared memory (reusable, one call per rank at
// a time).
class ThreadBootstrap {
 public:
  explicit ThreadBootstrap(int n) : n_(n), slots_(static_cast<size_t>(n)) {}
  comm::Bootstrap for_rank(int r) {
    return {r, n_, [this, r](const Bytes& mine) { return allgather(r, mine); }};
  }

 private:
  std::vector<Bytes> allgather(int r, const Bytes& mine) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !draining_; });
    slots_[static_cast<size_t>(r)] = mine;
    if (++arrived_ == n_) {
      draining_ = true;
      cv_.notify_all();
    }
    cv_.wait(lock, [&] { return draining_; });
    std::vector<Bytes> all = slots_;
    if (--arrived_ == 0) {
      draining_ = false;
      cv_.notify_all();
    }
    return all;
  }
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Bytes> slots_;
  int arrived_ = 0;
  bool draining_ = false;
};

// N TCP transports of one job on 127.0.0.1 (their constructors run concurrently: connecting is
// collective).
// `Boot` is anything with for_rank(r) -> comm::Bootstrap (tcp_intruder.h's IntrudedBootstrap).
template <typename Boot>
std::vector<std::unique_ptr<comm::Transport>> make_tcp_group(int n, comm::TcpOptions opt, Boot& boot) {
  std::vector<std::unique_ptr<comm::Transport>> group(static_cast<size_t>(n));
  opt.interface = opt.interface.empty() ? "127.0.0.1" : opt.interface;
  ThreadGroup threads;
  for (int r = 0; r < n; ++r)
    threads.spawn([&, r] { group[static_cast<size_t>(r)] = comm::make_tcp_transport(boot.for_rank(r), opt); });
  threads.join();
  return group;
}

inline std::vector<std::unique_ptr<comm::Transport>> make_tcp_group(int n, comm::TcpOptions opt = {}) {
  ThreadBootstrap boot(n);
  return make_tcp_group(n, opt, boot);
}

// The transports close together, as the ranks of a job do (each waits for its peers' side).
inline void close_group(std::vector<std::unique_ptr<comm::Transport>>& group) {
  ThreadGroup closers;
  for (auto& t : group) closers.spawn([&t] { t.reset(); });
  closers.join();
}

template <typename Fn>
void run_tcp_ranks(int n, Fn fn, comm::TcpOptions opt = {}) {
  auto group = make_tcp_group(n, opt);
  std::exception_ptr error;
  {
    ThreadGroup threads;
    for (int r = 0; r < n; ++r) threads.spawn([&fn, t = group[static_cast<size_t>(r)].get()] { fn(*t); });
    try {
      threads.join();
    } catch (...) {
      error = std::current_exception();
    }
  }
  close_group(group);
  if (error) std::rethrow_exception(error);
}

// run_ranks or run_tcp_ranks by name ("inproc", "tcp"): the transport-agnostic tests run on both.
template <typename Fn>
void run_ranks_on(const std::string& transport, int n, Fn fn) {
  if (transport == "tcp")
    run_tcp_ranks(n, fn);
  else
    run_ranks(n, fn);
}

}  // namespace sfb::testing
