#pragma once
// Runs N ranks as threads over the in-process transport; rethrows the first rank's exception
// after every thread has been joined.
#include "sfb/comm/transport.h"
#include "sfb/core/thread_group.h"

namespace sfb::testing {

template <typename Fn>
void run_ranks(int n, Fn fn) {
  auto group = comm::make_inproc_group(n);
  ThreadGroup threads;
  for (int r = 0; r < n; ++r) threads.spawn([&fn, t = group[static_cast<size_t>(r)].get()] { fn(*t); });
  threads.join();
}

}  // namespace sfb::testing
