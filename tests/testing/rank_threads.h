#pragma once
// Runs N ranks as threads over the in-process transport; rethrows the first rank's exception
// after every thread has been joined.
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "sfb/comm/transport.h"

namespace sfb::testing {

template <typename Fn>
void run_ranks(int n, Fn fn) {
  auto group = comm::make_inproc_group(n);
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr first;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(*group[static_cast<size_t>(r)]);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace sfb::testing
