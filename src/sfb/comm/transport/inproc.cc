#include "sfb/comm/transport/inproc.h"

namespace sfb::comm {

struct InprocTransport::Shared {
  struct Mailbox {
    std::mutex mu;
    std::deque<std::pair<int, std::pair<Tag, SharedBytes>>> q;
  };
  explicit Shared(int n) : boxes(static_cast<size_t>(n)) {}
  std::vector<Mailbox> boxes;
  std::mutex barrier_mu;
  std::condition_variable barrier_cv;
  int barrier_count = 0;
  int64_t barrier_generation = 0;
};

InprocTransport::InprocTransport(std::shared_ptr<Shared> shared, int rank) : shared_(std::move(shared)), rank_(rank) {
  init_counters(size());
}

int InprocTransport::size() const { return static_cast<int>(shared_->boxes.size()); }

void InprocTransport::do_send(int dst, Tag tag, SharedBytes data) {
  auto& box = shared_->boxes[static_cast<size_t>(dst)];
  std::lock_guard lock(box.mu);
  box.q.push_back({rank_, {tag, std::move(data)}});
}

std::optional<Message> InprocTransport::poll() {
  auto& box = shared_->boxes[static_cast<size_t>(rank_)];
  std::pair<int, std::pair<Tag, SharedBytes>> item;
  {
    std::lock_guard lock(box.mu);
    if (box.q.empty()) return std::nullopt;
    item = std::move(box.q.front());
    box.q.pop_front();
  }
  // The receiver owns its bytes, as it would after a network receive.
  return Message{item.first, item.second.first, Bytes(item.second.second->begin(), item.second.second->end())};
}

void InprocTransport::barrier() {
  std::unique_lock lock(shared_->barrier_mu);
  const int64_t gen = shared_->barrier_generation;
  if (++shared_->barrier_count == size()) {
    shared_->barrier_count = 0;
    ++shared_->barrier_generation;
    shared_->barrier_cv.notify_all();
  } else {
    shared_->barrier_cv.wait(lock, [&] { return shared_->barrier_generation != gen; });
  }
}

std::vector<std::unique_ptr<Transport>> make_inproc_group(int size) {
  auto shared = std::make_shared<InprocTransport::Shared>(size);
  std::vector<std::unique_ptr<Transport>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<InprocTransport>(shared, r));
  return out;
}

}  // namespace sfb::comm
