#include "sfb/comm/allreduce.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "sfb/core/bytes.h"
#include "sfb/core/error.h"

namespace sfb::comm {

namespace {

constexpr int32_t kContribution = 0, kSum = 1, kWhole = 2;

struct Range {
  int64_t begin = 0, count = 0;
};
Range chunk_of(int64_t n, int c, int P) { return {n * c / P, n * (c + 1) / P - n * c / P}; }
int64_t segments_in(int64_t count, int64_t seg) { return (count + seg - 1) / seg; }
Range segment_of(int64_t n, int c, int P, int64_t k, int64_t seg) {
  const Range ch = chunk_of(n, c, P);
  const int64_t b = ch.begin + k * seg;
  return {b, std::min(seg, ch.begin + ch.count - b)};
}

// out = ((0 + x_0) + x_1) + ... : the same additions, in the same order, on every rank.
void sum_in_rank_order(const std::vector<const float*>& x, int64_t count, std::vector<float>& out) {
  out.assign(static_cast<size_t>(count), 0.0f);
  for (const float* xq : x)
    for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] += xq[i];
}

const float* values_of(const Message& m) { return reinterpret_cast<const float*>(m.data.data() + kAllreduceHeadBytes); }

// mine[0, count) = the rank-order sum of this rank's values there and the others' in `from` (by
// rank; from[r] unused), through `x` (one pointer a rank) and `scratch`: the all-reduce's own
// scratch, kept across calls (the segmented all-reduce sums a segment at a time).
void sum_from_ranks(int r, float* mine, const std::vector<Message>& from, int64_t count, std::vector<const float*>& x,
                    std::vector<float>& scratch) {
  x.resize(from.size());
  for (size_t q = 0; q < from.size(); ++q) x[q] = static_cast<int>(q) == r ? mine : values_of(from[q]);
  sum_in_rank_order(x, count, scratch);
  std::copy(scratch.begin(), scratch.end(), mine);
}

// The segments of each owner's chunk of n values, `seg` values a segment.
std::vector<int64_t> segments_per_owner(int64_t n, int P, int64_t seg) {
  std::vector<int64_t> segs(static_cast<size_t>(P));
  for (int c = 0; c < P; ++c) segs[static_cast<size_t>(c)] = segments_in(chunk_of(n, c, P).count, seg);
  return segs;
}

// A message the segmented all-reduce did not expect: the ranks disagree on the call.
[[noreturn]] void unexpected_segment(const std::string& who, int from, const std::string& what) {
  throw CommError(
      fmt::format("{}: rank {} sent {}; do the ranks run the same all-reduce (size, cost model)?", who, from, what));
}

}  // namespace

AllreduceHead parse_allreduce_head(const Message& m, const std::string& who) {
  ByteReader r(m.data, fmt::format("{}: all-reduce message from rank {}", who, m.src), ByteReader::Source::kMessage);
  AllreduceHead h;
  h.id = r.get<int64_t>("id");
  h.phase = r.get<int32_t>("phase");
  h.chunk = r.get<int32_t>("chunk");
  h.segment = r.get<int32_t>("segment");
  h.count = r.get<int32_t>("count");
  if (h.count < 0 || m.data.size() != kAllreduceHeadBytes + static_cast<size_t>(h.count) * sizeof(float))
    r.fail(fmt::format("{}: {} bytes for {} values", r.what(), m.data.size(), h.count));
  return h;
}

RankOrderAllreduce::RankOrderAllreduce(Channel& ch, int ranks, AllreduceOptions opt) : ch_(ch), P_(ranks), opt_(opt) {
  SFB_ENFORCE(P_ >= 1 && P_ <= ch.transport().size() && ch.rank() < P_, "rank {} in an all-reduce of {} of {}",
              ch.rank(), P_, ch.transport().size());
  SFB_ENFORCE(opt_.min_segment_bytes >= 4 && opt_.window_bytes >= 4, "segment {} window {}", opt_.min_segment_bytes,
              opt_.window_bytes);
}

RankOrderAllreduce::Algo RankOrderAllreduce::algo_for(int64_t bytes) const {
  return allreduce_direct(bytes, P_, cost_) ? Algo::kDirect : Algo::kSegmented;
}

void RankOrderAllreduce::run(std::span<float> data, int64_t id) {
  if (P_ == 1) return;
  SFB_ENFORCE(data.size() <= size_t{1} << 40, "all-reduce of {} values", data.size());
  if (algo_for(static_cast<int64_t>(data.size_bytes())) == Algo::kDirect)
    direct(data, id);
  else
    segmented(data, id);
}

SharedBytes RankOrderAllreduce::encode(const Head& h, const float* values) const {
  ByteWriter w(kAllreduceHeadBytes + static_cast<size_t>(h.count) * sizeof(float));
  w.put<int64_t>(h.id);
  w.put<int32_t>(h.phase);
  w.put<int32_t>(h.chunk);
  w.put<int32_t>(h.segment);
  w.put<int32_t>(h.count);
  w.put_array(values, static_cast<size_t>(h.count));
  return std::make_shared<const Bytes>(w.take());
}

// The next message of call `id`: one kept from earlier first, then the channel's, keeping those of
// later calls for them.
Message RankOrderAllreduce::next(int64_t id, Head& head) {
  const std::string who = fmt::format("rank {}: all-reduce {}", ch_.rank(), id);
  if (auto m = ch_.take_held([&](const Message& h) { return parse_allreduce_head(h, who).id == id; })) {
    head = parse_allreduce_head(*m, who);
    return std::move(*m);
  }
  for (;;) {
    Message m = ch_.recv();
    if (m.src < 0 || m.src >= P_ || m.src == ch_.rank())
      throw CommError(fmt::format("{}: message from rank {}, which is not in the all-reduce", who, m.src));
    head = parse_allreduce_head(m, who);
    if (head.id == id) return m;
    if (head.id < id)
      throw CommError(
          fmt::format("{}: message of finished all-reduce {} from rank {} (a duplicate?)", who, head.id, m.src));
    ch_.hold(std::move(m));
  }
}

void RankOrderAllreduce::direct(std::span<float> data, int64_t id) {
  const int r = ch_.rank();
  const auto n = static_cast<int32_t>(data.size());
  SFB_ENFORCE(static_cast<size_t>(n) == data.size(), "direct all-reduce of {} values", data.size());
  const auto mine = encode({id, kWhole, 0, 0, n}, data.data());
  for (int q = 1; q < P_; ++q) ch_.send((r + q) % P_, mine);
  std::vector<Message> from(static_cast<size_t>(P_));
  for (int i = 0; i < P_ - 1; ++i) {
    Head h;
    Message m = next(id, h);
    if (h.phase != kWhole || h.count != n || !from[static_cast<size_t>(m.src)].data.empty())
      throw CommError(fmt::format(
          "rank {}: all-reduce {} (direct, {} values): rank {} sent phase {} with {} values; do the ranks run "
          "the same all-reduce (size, cost model)?",
          r, id, n, m.src, h.phase, h.count));
    from[static_cast<size_t>(m.src)] = std::move(m);
  }
  sum_from_ranks(r, data.data(), from, n, ranks_, sum_);
}

void RankOrderAllreduce::segmented(std::span<float> data, int64_t id) {
  const int r = ch_.rank();
  const auto n = static_cast<int64_t>(data.size());
  const int64_t seg_bytes = opt_.segment_for(static_cast<int64_t>(data.size_bytes()) / P_);
  const int64_t seg = std::max<int64_t>(1, seg_bytes / 4), window = opt_.window_for(seg_bytes);
  const std::vector<int64_t> segs = segments_per_owner(n, P_, seg);
  std::vector<int64_t> sent(static_cast<size_t>(P_), 0), back(static_cast<size_t>(P_), 0);
  int64_t to_receive = std::accumulate(segs.begin(), segs.end(), int64_t{0}) - segs[static_cast<size_t>(r)];
  // Contributions to owner c, at most `window` segments ahead of the sums back from it.
  auto pump = [&](int c) {
    auto& k = sent[static_cast<size_t>(c)];
    while (k < segs[static_cast<size_t>(c)] && k - back[static_cast<size_t>(c)] < window) {
      const Range s = segment_of(n, c, P_, k, seg);
      ch_.send(c, encode({id, kContribution, c, static_cast<int32_t>(k), static_cast<int32_t>(s.count)},
                         data.data() + s.begin));
      ++k;
    }
  };
  for (int q = 1; q < P_; ++q) pump((r + q) % P_);
  // This rank's segments: the contributions so far, per segment.
  const int64_t own = segs[static_cast<size_t>(r)];
  std::vector<std::vector<Message>> got(static_cast<size_t>(own));
  std::vector<int> have(static_cast<size_t>(own), 0);
  int64_t owned_left = own;
  const std::string who = fmt::format("rank {}: all-reduce {} (segmented, {} values)", r, id, n);
  while (owned_left > 0 || to_receive > 0) {
    Head h;
    Message m = next(id, h);
    const int q = m.src;
    if (h.phase == kContribution) {
      const int64_t k = h.segment;
      if (h.chunk != r || k < 0 || k >= own || h.count != segment_of(n, r, P_, k, seg).count ||
          (!got[static_cast<size_t>(k)].empty() && !got[static_cast<size_t>(k)][static_cast<size_t>(q)].data.empty()))
        unexpected_segment(who, q,
                           fmt::format("a contribution to chunk {} segment {} with {} values", h.chunk, k, h.count));
      auto& slot = got[static_cast<size_t>(k)];
      slot.resize(static_cast<size_t>(P_));
      slot[static_cast<size_t>(q)] = std::move(m);
      if (++have[static_cast<size_t>(k)] < P_ - 1) continue;
      const Range s = segment_of(n, r, P_, k, seg);
      sum_from_ranks(r, data.data() + s.begin, slot, s.count, ranks_, sum_);
      std::vector<Message>().swap(slot);
      const auto out =
          encode({id, kSum, r, static_cast<int32_t>(k), static_cast<int32_t>(s.count)}, data.data() + s.begin);
      for (int p = 1; p < P_; ++p) ch_.send((r + p) % P_, out);
      --owned_left;
    } else if (h.phase == kSum && h.chunk == q && h.segment == back[static_cast<size_t>(q)] &&
               h.segment < segs[static_cast<size_t>(q)] && h.count == segment_of(n, q, P_, h.segment, seg).count) {
      const Range s = segment_of(n, q, P_, h.segment, seg);
      std::memcpy(data.data() + s.begin, values_of(m), static_cast<size_t>(s.count) * sizeof(float));
      ++back[static_cast<size_t>(q)];
      --to_receive;
      pump(q);
    } else {
      unexpected_segment(who, q,
                         fmt::format("phase {} chunk {} segment {} with {} values; expected its sum of segment {}",
                                     h.phase, h.chunk, h.segment, h.count, back[static_cast<size_t>(q)]));
    }
  }
}

std::unique_ptr<Allreduce> make_rank_order_allreduce(Channel& ch, int ranks) {
  return std::make_unique<RankOrderAllreduce>(ch, ranks);
}

}  // namespace sfb::comm
