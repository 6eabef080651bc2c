#include "sfb/mgwfbp/det_allreduce.h"

#include <cstring>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::mgwfbp {
namespace {
struct Head {
  int64_t id;
  int32_t phase;  // 0: contribution to the owner, 1: the owner's sum
  int32_t chunk;
};
}  // namespace

comm::Message RankOrderAllreduce::next_from(int src) {
  auto& q = stash_[static_cast<size_t>(src)];
  while (q.empty()) {
    comm::Message m = t_.recv(comm::kTagReduce);
    if (m.src < 0 || m.src >= t_.size()) throw CommError(fmt::format("all-reduce message from rank {}", m.src));
    stash_[static_cast<size_t>(m.src)].push_back(std::move(m));
  }
  comm::Message m = std::move(q.front());
  q.pop_front();
  return m;
}

void RankOrderAllreduce::run(std::span<float> data, int64_t id) {
  const int P = t_.size(), r = t_.rank();
  if (P == 1) return;
  const auto n = static_cast<int64_t>(data.size());
  auto begin = [&](int c) { return n * c / P; };
  auto count = [&](int c) { return n * (c + 1) / P - n * c / P; };
  comm::Bytes msg;
  auto send = [&](int dst, int phase, int c) {
    const Head h{id, phase, c};
    msg.resize(sizeof(h) + static_cast<size_t>(count(c)) * sizeof(float));
    std::memcpy(msg.data(), &h, sizeof(h));
    if (count(c) > 0) std::memcpy(msg.data() + sizeof(h), data.data() + begin(c), static_cast<size_t>(count(c)) * sizeof(float));
    t_.send(dst, comm::kTagReduce, msg);
  };
  auto receive = [&](int src, int phase, int c) {
    comm::Message m = next_from(src);
    Head h{};
    const size_t want = sizeof(h) + static_cast<size_t>(count(c)) * sizeof(float);
    if (m.data.size() == want) std::memcpy(&h, m.data.data(), sizeof(h));
    if (m.data.size() != want || h.id != id || h.phase != phase || h.chunk != c)
      throw CommError(fmt::format("rank {}: all-reduce message from rank {} ({} bytes, id {}, phase {}, chunk {}); "
                                  "expected {} bytes, id {}, phase {}, chunk {}",
                                  r, src, m.data.size(), h.id, h.phase, h.chunk, want, id, phase, c));
    return m;
  };
  // 1. Everyone sends chunk c to its owner c.
  for (int c = 0; c < P; ++c)
    if (c != r) send(c, 0, c);
  // 2. The owner adds the P contributions in rank order.
  std::vector<comm::Message> parts(static_cast<size_t>(P));
  for (int q = 0; q < P; ++q)
    if (q != r) parts[static_cast<size_t>(q)] = receive(q, 0, r);
  std::vector<float> sum(static_cast<size_t>(count(r)), 0.0f);
  for (int q = 0; q < P; ++q) {
    const float* src = q == r ? data.data() + begin(r)
                              : reinterpret_cast<const float*>(parts[static_cast<size_t>(q)].data.data() + sizeof(Head));
    for (int64_t i = 0; i < count(r); ++i) sum[static_cast<size_t>(i)] += src[i];
  }
  if (count(r) > 0) std::memcpy(data.data() + begin(r), sum.data(), sum.size() * sizeof(float));
  // 3. The owners send the sums to everyone.
  for (int q = 0; q < P; ++q)
    if (q != r) send(q, 1, r);
  for (int q = 0; q < P; ++q) {
    if (q == r) continue;
    comm::Message m = receive(q, 1, q);
    if (count(q) > 0) std::memcpy(data.data() + begin(q), m.data.data() + sizeof(Head), static_cast<size_t>(count(q)) * sizeof(float));
  }
}

}  // namespace sfb::mgwfbp
