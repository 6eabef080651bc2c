#include "sfb/comm/rank_order_allreduce.h"

#include <algorithm>

#include <fmt/format.h>

#include "sfb/comm/allreduce_chunks.h"
#include "sfb/core/error.h"

namespace sfb::comm {

void RankOrderAllreduce::run(std::span<float> data, int64_t id) {
  const int P = t_.size(), r = t_.rank();
  if (P == 1) return;
  const auto n = static_cast<int64_t>(data.size());
  const std::string who = fmt::format("rank {}: rank-order all-reduce", r);
  auto chunk = [&](int c) {
    const ChunkRange cr = chunk_range(n, c, P);
    return data.subspan(static_cast<size_t>(cr.begin), static_cast<size_t>(cr.count));
  };
  // 1. Everyone sends chunk c to its owner c.
  for (int c = 0; c < P; ++c)
    if (c != r) t_.send(c, kTagReduce, encode_chunk({id, 0, c}, chunk(c)));
  // 2. The owner adds the P contributions in rank order.
  const auto mine = chunk(r);
  std::vector<Message> parts(static_cast<size_t>(P));
  std::vector<std::span<const float>> from(static_cast<size_t>(P));
  for (int q = 0; q < P; ++q) {
    if (q == r) {
      from[static_cast<size_t>(q)] = mine;
      continue;
    }
    parts[static_cast<size_t>(q)] = stash_.next_from(q);
    from[static_cast<size_t>(q)] =
        expect_chunk(parts[static_cast<size_t>(q)], {id, 0, r}, static_cast<int64_t>(mine.size()), who);
  }
  std::vector<float> sum(mine.size(), 0.0f);
  for (int q = 0; q < P; ++q)
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += from[static_cast<size_t>(q)][i];
  std::copy(sum.begin(), sum.end(), mine.begin());
  // 3. The owners send the sums to everyone.
  for (int q = 0; q < P; ++q)
    if (q != r) t_.send(q, kTagReduce, encode_chunk({id, 1, r}, mine));
  for (int q = 0; q < P; ++q) {
    if (q == r) continue;
    const Message m = stash_.next_from(q);
    const auto in = expect_chunk(m, {id, 1, q}, static_cast<int64_t>(chunk(q).size()), who);
    std::copy(in.begin(), in.end(), chunk(q).begin());
  }
}

}  // namespace sfb::comm
