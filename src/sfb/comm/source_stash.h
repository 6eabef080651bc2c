#pragma once
// The messages of one tag, queued by source: for a collective that needs the next message from a
// given rank while messages of its later calls (from faster ranks) may already be arriving. Every
// message received while waiting for one source is kept for its own source, in arrival order
// (a transport keeps the order of one source's messages). Used by the rank-order all-reduce and the
// SF all-gather.
//
// Threads: the caller must be the only thread receiving this tag on the transport.
#include <deque>
#include <vector>

#include "sfb/comm/channel.h"

namespace sfb::comm {

class SourceStash {
 public:
  explicit SourceStash(Channel& ch) : ch_(ch), queues_(static_cast<size_t>(ch.transport().size())) {}
  // The next message of the channel's tag from rank `src`; waits at most the transport's peer
  // timeout (Channel::recv). Throws CommError for a message from a rank outside the group.
  Message next_from(int src);

 private:
  Channel& ch_;
  std::vector<std::deque<Message>> queues_;
};

}  // namespace sfb::comm
