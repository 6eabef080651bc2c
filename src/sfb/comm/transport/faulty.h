#pragma once
// A Transport that wraps another and injects faults at chosen calls, for tests of what the
// runtime does when the network misbehaves (in the spirit of rabit's mock engine):
//   * drop the N-th send (counted over sends with tag `tag`, or all tags when tag < 0);
//   * delay every send by delay_ms (the calling thread sleeps first);
//   * kill: from the N-th call (send or poll) on, every call throws CommError, as if this rank's
//     network had died; or from the N-th send (counted as for drop_send) on: a death at a chosen
//     point of a protocol (the first push to a parameter server) whatever came before it;
//   * go silent: from the N-th send on (counted as for drop_send), every send is lost without an
//     error, as if this rank were stopped (SIGSTOP) or its link cut: its peers must notice.
// Thread-safety as the wrapped transport; the call counters are atomic.
#include <atomic>
#include <memory>

#include "sfb/comm/transport.h"

namespace sfb::comm {

struct FaultSpec {
  Tag tag = -1;              // which sends count for drop_send (-1: all)
  int64_t drop_send = -1;    // 0-based index of the send to drop (-1: none)
  double delay_ms = 0.0;     // per send
  int64_t kill_at = -1;      // 0-based index of the first failing call (-1: never)
  int64_t silent_from = -1;  // 0-based index of the first lost send; all later ones are lost too (-1: never)
  // 0-based index of the send (counted as for drop_send) from which every call throws (-1: never)
  int64_t kill_at_send = -1;
};

class FaultyTransport : public Transport {
 public:
  FaultyTransport(std::unique_ptr<Transport> inner, FaultSpec spec);
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void barrier() override;
  void flush() override { inner_->flush(); }
  void set_peer_timeout(double seconds) override {
    Transport::set_peer_timeout(seconds);
    inner_->set_peer_timeout(seconds);
  }
  bool peer_gone(int peer) const override { return inner_->peer_gone(peer); }
  bool wait_for_message(SteadyClock::time_point until) override { return inner_->wait_for_message(until); }
  void wake() override { inner_->wake(); }
  double own_threads_cpu_seconds() const override { return inner_->own_threads_cpu_seconds(); }
  int64_t dropped() const { return dropped_.load(); }

 protected:
  void do_send(int dst, Tag tag, SharedBytes data) override;
  std::optional<Message> poll() override;

 private:
  void count_call();
  CommError killed_at_send() const;
  std::unique_ptr<Transport> inner_;
  FaultSpec spec_;
  std::atomic<int64_t> calls_{0}, tagged_sends_{0}, dropped_{0};
  std::atomic<bool> killed_{false};
};

}  // namespace sfb::comm
