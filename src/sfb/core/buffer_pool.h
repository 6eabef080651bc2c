#pragma once
// A fixed number of reusable matrix buffers shared between threads: acquire() blocks while every
// buffer is out, and a buffer comes back by itself when the last shared_ptr to it is dropped (on
// whichever thread that is). Bounds the memory of a pipeline whose stages run at different speeds
// (the all-reduce baseline: blocks formed, all-reduced, applied) to `count` buffers, however far
// one stage runs ahead. The pool's state outlives the pool while buffers are out.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "sfb/core/tensor.h"

namespace sfb {

class BufferPool {
 public:
  explicit BufferPool(int count) : state_(std::make_shared<State>()) { state_->left = count; }
  // A buffer of rows x cols (its memory reused when it was as large before); null once aborted.
  std::shared_ptr<Matrix> acquire(int64_t rows, int64_t cols) {
    std::unique_lock lock(state_->mu);
    state_->cv.wait(lock, [this] { return state_->aborted || state_->left > 0 || !state_->free.empty(); });
    if (state_->aborted) return nullptr;
    std::unique_ptr<Matrix> m;
    if (!state_->free.empty()) {
      m = std::move(state_->free.back());
      state_->free.pop_back();
    } else {
      --state_->left;
      m = std::make_unique<Matrix>();
    }
    lock.unlock();
    if (m->rows() != rows || m->cols() != cols) m->resize(rows, cols);
    return std::shared_ptr<Matrix>(m.release(), [s = state_](Matrix* p) {
      std::lock_guard lock(s->mu);
      s->free.emplace_back(p);
      s->cv.notify_one();
    });
  }
  // Wakes every acquire() (they return null).
  void abort() {
    std::lock_guard lock(state_->mu);
    state_->aborted = true;
    state_->cv.notify_all();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::unique_ptr<Matrix>> free;
    int left = 0;  // buffers not yet created
    bool aborted = false;
  };
  std::shared_ptr<State> state_;
};

}  // namespace sfb
