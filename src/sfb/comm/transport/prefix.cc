#include "sfb/comm/transport/prefix.h"

#include <fmt/format.h>

#include "sfb/comm/setup_collectives.h"
#include "sfb/core/error.h"

namespace sfb::comm {

PrefixTransport::PrefixTransport(Transport& inner, int size) : inner_(inner), size_(size) {
  SFB_CHECK(size >= 1 && size <= inner.size() && inner.rank() < size,
            "a transport of the first {} of {} ranks cannot serve rank {}", size, inner.size(), inner.rank());
  init_counters(size);
  set_peer_timeout(inner.peer_timeout_s());
}

void PrefixTransport::do_send(int dst, Tag tag, SharedBytes data) { inner_.send_shared(dst, tag, std::move(data)); }

std::optional<Message> PrefixTransport::poll() {
  auto m = inner_.try_recv();
  if (m && m->src >= size_)
    throw CommError(fmt::format("rank {}: a {} message from rank {}, outside the first {} ranks that measure together",
                                rank(), tag_name(m->tag), m->src, size_));
  return m;
}

void PrefixTransport::barrier() { allgather_i64(*this, 0); }

}  // namespace sfb::comm
