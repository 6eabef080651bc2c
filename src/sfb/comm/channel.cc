#include "sfb/comm/channel.h"

#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/core/timer.h"

namespace sfb::comm {

void QueueChannel::push(Message m) {
  std::lock_guard lock(mu_);
  q_.push_back(std::move(m));
  cv_.notify_one();
}

void QueueChannel::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

Message QueueChannel::recv() {
  std::unique_lock lock(mu_);
  const double timeout = transport().peer_timeout_s();
  if (!cv_.wait_until(lock, deadline_after(timeout), [&] { return closed_ || !q_.empty(); }))
    throw CommError(
        fmt::format("rank {}: no {} message for {} s (runtime.peer_timeout_s): a peer is stopped, lost "
                    "or far behind{}",
                    rank(), tag_name(tag()), timeout, transport().gone_peers()));
  if (closed_) throw Closed{};
  Message m = std::move(q_.front());
  q_.pop_front();
  return m;
}

}  // namespace sfb::comm
