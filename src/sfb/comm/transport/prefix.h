#pragma once
// The first `size` ranks of another transport as a transport of their own: what the workers of a
// job launched with FMS's server ranks (mpirun -np P+S) use to measure among themselves while the
// servers wait (profiler/scheme_profiler.h). Sends and receives go through the wrapped transport
// unchanged (ranks keep their numbers); barrier() is a gather and release among the `size` ranks
// only. Only those ranks may use it, and nothing outside them may send to them meanwhile.
// Thread-safety as the wrapped transport.
#include "sfb/comm/transport.h"

namespace sfb::comm {

class PrefixTransport : public Transport {
 public:
  // Throws InvalidArgument unless 1 <= size <= inner.size() and inner.rank() < size.
  PrefixTransport(Transport& inner, int size);
  int rank() const override { return inner_.rank(); }
  int size() const override { return size_; }
  void barrier() override;
  void flush() override { inner_.flush(); }
  void set_peer_timeout(double seconds) override {
    Transport::set_peer_timeout(seconds);
    inner_.set_peer_timeout(seconds);
  }
  bool peer_gone(int peer) const override { return inner_.peer_gone(peer); }
  bool wait_for_message(SteadyClock::time_point until) override { return inner_.wait_for_message(until); }
  void wake() override { inner_.wake(); }
  double own_threads_cpu_seconds() const override { return inner_.own_threads_cpu_seconds(); }

 protected:
  void do_send(int dst, Tag tag, SharedBytes data) override;
  std::optional<Message> poll() override;

 private:
  Transport& inner_;
  int size_;
};

}  // namespace sfb::comm
