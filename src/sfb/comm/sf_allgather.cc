#include "sfb/comm/sf_allgather.h"

#include <memory>

#include <fmt/format.h>

#include "sfb/comm/sf_codec.h"
#include "sfb/core/error.h"

namespace sfb::comm {

std::vector<std::vector<SfBatch>> SfAllgather::run(std::vector<SfBatch> mine, int64_t id) {
  const int P = ch_.transport().size(), r = ch_.rank();
  for (SfBatch& b : mine) {
    b.sender = r;
    b.clock = id;
  }
  if (P > 1) {
    auto msg = std::make_shared<const Bytes>(encode_sf_batches(mine));
    for (int q = 1; q < P; ++q) ch_.send((r + q) % P, msg);
  }
  std::vector<SfExpect> expect(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) expect[i] = {-1, mine[i].J, mine[i].D};
  std::vector<std::vector<SfBatch>> all(static_cast<size_t>(P));
  for (int q = 0; q < P; ++q) {
    if (q == r) continue;
    for (SfExpect& e : expect) e.sender = q;
    all[static_cast<size_t>(q)] = decode_sf_batches(stash_.next_from(q).data, expect);
    for (const SfBatch& b : all[static_cast<size_t>(q)])
      if (b.clock != id)
        throw CommError(
            fmt::format("rank {}: SF all-gather {} got rank {}'s batches of all-gather {}", r, id, q, b.clock));
  }
  all[static_cast<size_t>(r)] = std::move(mine);
  return all;
}

}  // namespace sfb::comm
