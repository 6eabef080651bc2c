#pragma once
// The bounded queues between threads (worker, CNN executor, exchanges): oneTBB's
// concurrent_bounded_queue (lock-free fast path, blocking push when full and pop when empty,
// abort() to wake every waiter with tbb::user_abort).
//
// Pages come from std::allocator instead of TBB's cache_aligned_allocator: the latter allocates
// inside libtbb, which sanitizers do not see, so ThreadSanitizer reported the reuse of a page
// freed by one queue and allocated by another as a data race (a false positive).
#include <memory>

#include <tbb/concurrent_queue.h>

namespace sfb {

template <typename T>
using BoundedQueue = tbb::concurrent_bounded_queue<T, std::allocator<T>>;

}  // namespace sfb
