#include "sfb/comm/ring_allreduce.h"

#include <algorithm>

#include <fmt/format.h>

#include "sfb/comm/allreduce_chunks.h"

namespace sfb::comm {

void ring_allreduce(Transport& t, int workers, std::span<float> data, int64_t id,
                    const std::function<Message()>& recv_left) {
  const int P = workers;
  const int r = t.rank();
  if (P == 1) return;
  const auto n = static_cast<int64_t>(data.size());
  const int right = (r + 1) % P, left = (r + P - 1) % P;
  const std::string who = fmt::format("rank {}: ring all-reduce", r);
  auto send_chunk = [&](int step, int c) {
    const ChunkRange cr = chunk_range(n, c, P);
    t.send(right, kTagReduce,
           encode_chunk({id, step, c}, data.subspan(static_cast<size_t>(cr.begin), static_cast<size_t>(cr.count))));
  };
  // The values of chunk c at this step, from the left neighbour.
  auto recv_chunk = [&](int step, int c, Message& m) {
    m = recv_left();
    if (m.src != left)
      throw CommError(fmt::format("{}: chunk from rank {}, expected one from rank {}", who, m.src, left));
    return expect_chunk(m, {id, step, c}, chunk_range(n, c, P).count, who);
  };
  Message m;
  // Reduce-scatter: after P - 1 steps rank r holds the full sum of chunk (r + 1) mod P.
  for (int s = 0; s < P - 1; ++s) {
    const int send_c = ((r - s) % P + P) % P;
    const int recv_c = ((r - s - 1) % P + P) % P;
    send_chunk(s, send_c);
    const auto in = recv_chunk(s, recv_c, m);
    float* out = data.data() + chunk_range(n, recv_c, P).begin;
    for (size_t i = 0; i < in.size(); ++i) out[i] += in[i];
  }
  // All-gather: pass the reduced chunks around the ring.
  for (int s = 0; s < P - 1; ++s) {
    const int send_c = ((r + 1 - s) % P + P) % P;
    const int recv_c = ((r - s) % P + P) % P;
    send_chunk(P - 1 + s, send_c);
    const auto in = recv_chunk(P - 1 + s, recv_c, m);
    std::copy(in.begin(), in.end(), data.data() + chunk_range(n, recv_c, P).begin);
  }
}

}  // namespace sfb::comm
