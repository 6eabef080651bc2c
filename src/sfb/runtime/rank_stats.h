#pragma once
// One worker's end-of-run statistics, and their encoding as the int64 payload words of its DONE
// control message (docs/formats.md): clocks, pairs sent, received, applied, checksum (bits),
// bytes sent, received, compute, update and wait nanoseconds, max lead, bytes from servers, v
// nonzeros sent.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sfb::runtime {

struct RankStats {
  int rank = 0;
  int64_t clocks = 0;          // clocks committed
  int64_t pairs_sent = 0;      // SF pairs sent, summed over destinations
  int64_t pairs_received = 0;  // SF pairs received from peers
  int64_t pairs_applied = 0;   // SF pairs applied to W, own included
  uint64_t checksum = 0;       // matrix_checksum of the final W
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  double compute_s = 0, update_s = 0, wait_s = 0;
  int64_t max_lead = 0;            // max over clocks and in-neighbours of (clock - applied clocks)
  int64_t bytes_from_servers = 0;  // fms: bytes received from the parameter servers
  int64_t v_nonzeros_sent = 0;     // sparse v: nonzeros of the v of the pairs sent (pairs_sent's)
};

inline constexpr size_t kRankStatsWords = 13;
std::vector<int64_t> pack_stats(const RankStats& s);
// Throws CommError naming `rank` when the word count is wrong.
RankStats unpack_stats(int rank, const std::vector<int64_t>& words);

}  // namespace sfb::runtime
