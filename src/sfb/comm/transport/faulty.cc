#include "sfb/comm/transport/faulty.h"

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::comm {

FaultyTransport::FaultyTransport(std::unique_ptr<Transport> inner, FaultSpec spec)
    : inner_(std::move(inner)), spec_(spec) {
  init_counters(inner_->size());
}

void FaultyTransport::count_call() {
  const int64_t n = calls_.fetch_add(1);
  if (spec_.kill_at >= 0 && n >= spec_.kill_at)
    throw CommError(fmt::format("rank {}: injected failure: transport killed at call {}", rank(), spec_.kill_at));
  if (killed_.load()) throw killed_at_send();
}

CommError FaultyTransport::killed_at_send() const {
  return CommError(fmt::format("rank {}: injected failure: transport killed at send {}", rank(), spec_.kill_at_send));
}

void FaultyTransport::do_send(int dst, Tag tag, SharedBytes data) {
  count_call();
  if (spec_.delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(spec_.delay_ms * 1000)));
  if (spec_.tag < 0 || tag == spec_.tag) {
    const int64_t n = tagged_sends_.fetch_add(1);
    if (spec_.kill_at_send >= 0 && n >= spec_.kill_at_send) {
      killed_.store(true);
      throw killed_at_send();
    }
    if (n == spec_.drop_send || (spec_.silent_from >= 0 && n >= spec_.silent_from)) {
      dropped_.fetch_add(1);
      return;
    }
  }
  inner_->send_shared(dst, tag, std::move(data));
}

std::optional<Message> FaultyTransport::poll() {
  count_call();
  return inner_->try_recv();
}

void FaultyTransport::barrier() {
  count_call();
  inner_->barrier();
}

}  // namespace sfb::comm
