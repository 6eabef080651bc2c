#pragma once
// N ranks as threads of one process: each rank owns a mailbox (mutex + deque); send() moves the
// shared buffer into the destination's mailbox. Used by tests and benchmarks.
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "sfb/comm/transport.h"

namespace sfb::comm {

class InprocTransport : public Transport {
 public:
  struct Shared;
  InprocTransport(std::shared_ptr<Shared> shared, int rank);
  int rank() const override { return rank_; }
  int size() const override;
  void barrier() override;

 protected:
  void do_send(int dst, Tag tag, SharedBytes data) override;
  std::optional<Message> poll() override;

 private:
  std::shared_ptr<Shared> shared_;
  int rank_;
};

}  // namespace sfb::comm
