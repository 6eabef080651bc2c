#include "sfb/comm/transport/latency.h"

namespace sfb::comm {

LatencyTransport::LatencyTransport(std::unique_ptr<Transport> inner, double latency_us)
    : inner_(std::move(inner)),
      latency_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(latency_us))) {
  init_counters(inner_->size());
}

std::optional<Message> LatencyTransport::poll() {
  // Take everything the network has delivered, stamped with its arrival; hand out the oldest once
  // its latency has passed (FIFO per sender is kept: arrival order is preserved).
  while (auto m = inner_->try_recv()) pending_.emplace_back(Clock::now(), std::move(*m));
  if (pending_.empty() || Clock::now() < pending_.front().first + latency_) return std::nullopt;
  Message m = std::move(pending_.front().second);
  pending_.pop_front();
  return m;
}

}  // namespace sfb::comm
