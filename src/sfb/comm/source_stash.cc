#include "sfb/comm/source_stash.h"

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::comm {

Message SourceStash::next_from(int src) {
  auto& q = queues_[static_cast<size_t>(src)];
  while (q.empty()) {
    Message m = ch_.recv();
    if (m.src < 0 || m.src >= ch_.transport().size())
      throw CommError(fmt::format("{} message from rank {}", tag_name(ch_.tag()), m.src));
    queues_[static_cast<size_t>(m.src)].push_back(std::move(m));
  }
  Message m = std::move(q.front());
  q.pop_front();
  return m;
}

}  // namespace sfb::comm
