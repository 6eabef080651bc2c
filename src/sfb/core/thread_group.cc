#include "sfb/core/thread_group.h"

#include <tbb/concurrent_queue.h>

namespace sfb {

ThreadGroup::~ThreadGroup() {
  bool running = false;
  for (auto& t : threads_) running = running || t.joinable();
  if (!running) return;
  abort();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void ThreadGroup::on_abort(std::function<void()> action) {
  {
    std::lock_guard lock(mu_);
    if (!aborted_) {
      actions_.push_back(std::move(action));
      return;
    }
  }
  action();  // the group has already been aborted
}

void ThreadGroup::spawn(std::function<void()> fn) {
  threads_.emplace_back([this, fn = std::move(fn)] {
    try {
      fn();
    } catch (const tbb::user_abort&) {
      // A queue was aborted because another thread failed first.
    } catch (...) {
      fail(std::current_exception());
    }
  });
}

void ThreadGroup::fail(std::exception_ptr e) {
  {
    std::lock_guard lock(mu_);
    if (!error_) error_ = e;
  }
  abort();
}

void ThreadGroup::abort() {
  std::call_once(abort_once_, [this] {
    std::vector<std::function<void()>> actions;
    {
      std::lock_guard lock(mu_);
      aborted_ = true;
      actions = actions_;
    }
    for (auto& a : actions) a();
  });
}

void ThreadGroup::join() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  if (auto e = error()) std::rethrow_exception(e);
}

std::exception_ptr ThreadGroup::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

}  // namespace sfb
