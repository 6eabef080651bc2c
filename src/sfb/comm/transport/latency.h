#pragma once
// A Transport that adds a fixed one-way latency to every message (comm.inject_latency_us): the
// kernel here has no netem, so latency studies inject it in our transport. A message becomes
// receivable `latency` after the wrapped transport delivered it; bandwidth is left to the network
// (tc tbf in scripts/netns-cluster.sh), so the delay does not serialise messages.
// Thread-safety as the wrapped transport: poll() from the receiving thread only.
#include <chrono>
#include <deque>
#include <memory>

#include "sfb/comm/transport.h"

namespace sfb::comm {

class LatencyTransport : public Transport {
 public:
  LatencyTransport(std::unique_ptr<Transport> inner, double latency_us);
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void barrier() override { inner_->barrier(); }
  void flush() override { inner_->flush(); }
  void set_peer_timeout(double seconds) override {
    Transport::set_peer_timeout(seconds);
    inner_->set_peer_timeout(seconds);
  }
  bool peer_gone(int peer) const override { return inner_->peer_gone(peer); }
  double own_threads_cpu_seconds() const override { return inner_->own_threads_cpu_seconds(); }

 protected:
  void do_send(int dst, Tag tag, SharedBytes data) override { inner_->send_shared(dst, tag, std::move(data)); }
  std::optional<Message> poll() override;

 private:
  using Clock = std::chrono::steady_clock;
  std::unique_ptr<Transport> inner_;
  Clock::duration latency_;
  std::deque<std::pair<Clock::time_point, Message>> pending_;  // receiving thread only
};

}  // namespace sfb::comm
