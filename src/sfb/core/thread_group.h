#pragma once
// Threads that fail together. The first exception any of them throws is kept; the group's abort
// actions then run once (they wake threads blocked on queues or condition variables, e.g.
// BoundedQueue::abort()); join() waits for every thread and rethrows that first exception. A
// thread that ends with tbb::user_abort (a queue aborted by an abort action) ends quietly: it is
// a consequence of the first failure, not a failure of its own.
//
// Used by the worker (compute, update and communication threads), the objective monitor, the
// CNN executor's communication thread, the exchanges and the tests that run ranks as threads.
//
// Threads: spawn(), on_abort() and join() on the owning thread; fail() and aborted() from any.
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sfb {

class ThreadGroup {
 public:
  ThreadGroup() = default;
  // Aborts and joins threads still running (an owner that forgot to join() must not leave a
  // thread touching freed state); the error, if any, is dropped.
  ~ThreadGroup();
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;

  // Registers an action run once when the group fails or is aborted (at once when it already has).
  void on_abort(std::function<void()> action);
  // Runs fn on a new thread; an exception from it fails the group.
  void spawn(std::function<void()> fn);
  // Keeps `e` if it is the first error, then aborts.
  void fail(std::exception_ptr e);
  // Runs the abort actions (once) without an error: the threads are asked to stop.
  void abort();
  bool aborted() const { return aborted_.load(); }
  // Waits for every spawned thread; rethrows the first error.
  void join();
  // The first error (null while none).
  std::exception_ptr error() const;

 private:
  mutable std::mutex mu_;
  std::exception_ptr error_;
  std::vector<std::function<void()>> actions_;
  std::atomic<bool> aborted_{false};
  std::once_flag abort_once_;
  std::vector<std::thread> threads_;
};

}  // namespace sfb
