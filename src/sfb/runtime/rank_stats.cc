#include "sfb/runtime/rank_stats.h"

#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::runtime {
namespace {
int64_t to_ns(double s) { return static_cast<int64_t>(s * 1e9); }
double to_s(int64_t ns) { return static_cast<double>(ns) * 1e-9; }
}  // namespace

std::vector<int64_t> pack_stats(const RankStats& s) {
  return {s.clocks,     s.pairs_sent,         s.pairs_received,   s.pairs_applied,   std::bit_cast<int64_t>(s.checksum),
          s.bytes_sent, s.bytes_received,     to_ns(s.compute_s), to_ns(s.update_s), to_ns(s.wait_s),
          s.max_lead,   s.bytes_from_servers, s.v_nonzeros_sent};
}

RankStats unpack_stats(int rank, const std::vector<int64_t>& v) {
  if (v.size() != kRankStatsWords)
    throw CommError(
        fmt::format("DONE from rank {}: {} statistics words, expected {}", rank, v.size(), kRankStatsWords));
  RankStats s;
  s.rank = rank;
  s.clocks = v[0];
  s.pairs_sent = v[1];
  s.pairs_received = v[2];
  s.pairs_applied = v[3];
  s.checksum = std::bit_cast<uint64_t>(v[4]);
  s.bytes_sent = v[5];
  s.bytes_received = v[6];
  s.compute_s = to_s(v[7]);
  s.update_s = to_s(v[8]);
  s.wait_s = to_s(v[9]);
  s.max_lead = v[10];
  s.bytes_from_servers = v[11];
  s.v_nonzeros_sent = v[12];
  return s;
}

}  // namespace sfb::runtime
