#pragma once
// A channel: the messages of one tag, as one collective algorithm sees them. The algorithms
// (allreduce.h, sf_allgather.h) send through the channel's transport and take the tag's messages
// from the channel, so the same code runs where the algorithm's thread receives for itself
// (TransportChannel: the CNN executor, benchmarks) and where another thread owns the transport's
// receiving side and hands the tag's messages over (QueueChannel: the worker's communication
// thread feeding the dense all-reduce baseline).
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "sfb/comm/transport.h"

namespace sfb::comm {

class Channel {
 public:
  Channel(Transport& t, Tag tag) : t_(t), tag_(tag) {}
  virtual ~Channel() = default;
  Transport& transport() const { return t_; }
  Tag tag() const { return tag_; }
  int rank() const { return t_.rank(); }
  void send(int dst, SharedBytes data) const { t_.send_shared(dst, tag_, std::move(data)); }
  // The next message of the tag from any rank, in the transport's order; throws CommError after
  // the transport's peer timeout without one (naming peers that have gone).
  virtual Message recv() = 0;
  // Messages that arrived before the call they belong to (from a rank that is ahead) wait here,
  // on the channel, so whichever algorithm object makes that call finds them (take_held).
  void hold(Message m) { held_.push_back(std::move(m)); }
  template <typename Pred>
  std::optional<Message> take_held(Pred belongs) {
    for (auto it = held_.begin(); it != held_.end(); ++it)
      if (belongs(*it)) {
        Message m = std::move(*it);
        held_.erase(it);
        return m;
      }
    return std::nullopt;
  }

 private:
  Transport& t_;
  const Tag tag_;
  std::deque<Message> held_;  // the receiving thread only
};

// The calling thread receives the tag from the transport itself (it must be the only thread
// receiving that tag).
class TransportChannel final : public Channel {
 public:
  using Channel::Channel;
  Message recv() override { return transport().recv(tag()); }
};

// Another thread receives from the transport and push()es the tag's messages; recv() waits for
// them. close() wakes a waiting recv(), which then throws Closed.
class QueueChannel final : public Channel {
 public:
  struct Closed {};
  using Channel::Channel;
  void push(Message m);
  void close();
  Message recv() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> q_;
  bool closed_ = false;
};

}  // namespace sfb::comm
