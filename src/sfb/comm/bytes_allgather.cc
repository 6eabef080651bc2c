#include "sfb/comm/bytes_allgather.h"

#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::comm {

std::vector<Bytes> BytesAllgather::run(Bytes mine, int64_t id) {
  start(mine, id);
  return finish(std::move(mine), id);
}

void BytesAllgather::start(std::span<const std::byte> mine, int64_t id) {
  const int P = ch_.transport().size(), r = ch_.rank();
  if (P <= 1) return;
  auto msg = std::make_shared<Bytes>(sizeof(int64_t) + mine.size());
  std::memcpy(msg->data(), &id, sizeof id);
  if (!mine.empty()) std::memcpy(msg->data() + sizeof id, mine.data(), mine.size());
  const SharedBytes shared = std::move(msg);
  for (int q = 1; q < P; ++q) ch_.send((r + q) % P, shared);
}

std::vector<Bytes> BytesAllgather::finish(Bytes mine, int64_t id) {
  const int P = ch_.transport().size(), r = ch_.rank();
  std::vector<Bytes> all(static_cast<size_t>(P));
  for (int q = 0; q < P; ++q) {
    if (q == r) continue;
    Message m = stash_.next_from(q);
    int64_t got = -1;
    if (m.data.size() >= sizeof got) std::memcpy(&got, m.data.data(), sizeof got);
    if (got != id)
      throw CommError(fmt::format("rank {}: all-gather {} on the {} tag got {} bytes from rank {} of call {}", r, id,
                                  tag_name(ch_.tag()), m.data.size(), q, got));
    all[static_cast<size_t>(q)].assign(m.data.begin() + sizeof got, m.data.end());
  }
  all[static_cast<size_t>(r)] = std::move(mine);
  return all;
}

}  // namespace sfb::comm
