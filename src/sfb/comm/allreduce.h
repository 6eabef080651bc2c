#pragma once
// Sum all-reduce of float buffers, the collective under the dense baselines (the SFB engine's
// "allreduce" scheme, the CNN mode's dense groups). Two engines behind one interface:
//
//  * RankOrderAllreduce (comm.collectives = "sfb"): every element's sum is
//    ((0 + x_0) + x_1) + ... + x_{P-1}, the ranks' values added in rank order, on every rank and
//    whatever the message boundaries, the segment size or the algorithm: MG-WFBP's planners give
//    bitwise the same gradients (docs/design.md, invariant 6) and every replica the same bits.
//    Two algorithms, chosen by size from the cost model T(M) = a + b M (all ranks choose alike):
//     - segmented (large buffers): a reduce-scatter and an all-gather by direct exchange, pipelined.
//       Rank c owns chunk c (elements [n c / P, n (c + 1) / P)), cut into segments (a 16th of the
//       chunk, within AllreduceOptions' bounds: small buffers still pipeline, large ones keep the
//       message count low). Every rank sends each owner its segments, at most window_bytes ahead
//       of the sums it has back from that owner (bounded memory, and the ranks' flows into an
//       owner advance together); an owner adds a
//       segment's P contributions in rank order as soon as the last arrives and sends the sum to
//       every rank at once, while later segments are still arriving. Each rank sends and receives
//       2 (P - 1) / P of the buffer, as a ring does, but on all its links at once and in 2 steps
//       instead of 2 (P - 1): on a switched network every link runs both ways all the time.
//     - direct (small buffers, and always for P = 2): every rank sends its whole buffer to every
//       other and adds all P in rank order itself: one step of latency, (P - 1) M bytes out.
//  * MpiAllreduce (comm.collectives = "mpi", comm/mpi_collectives.h): Open MPI's MPI_Allreduce.
//
// Messages (kTagReduce unless the channel says otherwise): a 24-byte head -- i64 id (the call's id,
// checked), i32 phase (0: a contribution to the owner, 1: the owner's sum, 2: a whole buffer of the
// direct algorithm), i32 chunk, i32 segment, i32 count of float32 values -- then the values
// (docs/formats.md). A message of a later call (from a rank that is ahead) waits on the channel for
// its call, so the ids of every engine on one channel must increase together.
//
// Threads: one thread per rank calls run(); it must be the only receiver of the channel's tag.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sfb/comm/channel.h"
#include "sfb/core/collective_cost.h"

namespace sfb::comm {

// The head of an all-reduce message.
struct AllreduceHead {
  int64_t id = 0;
  int32_t phase = 0, chunk = 0, segment = 0, count = 0;
};
inline constexpr size_t kAllreduceHeadBytes = 24;
// Checks the length against the count and returns the head; throws CommError naming `who`.
AllreduceHead parse_allreduce_head(const Message& m, const std::string& who);

using LinkCost = sfb::LinkCost;  // core/collective_cost.h: the size rule, shared with the planner

class Allreduce {
 public:
  virtual ~Allreduce() = default;
  // Sums `data` over every rank of the collective in place; `id` labels the call (increasing).
  virtual void run(std::span<float> data, int64_t id) = 0;
  virtual std::string name() const = 0;
  // The link cost an engine that chooses its algorithm by size chooses by; every rank must set
  // the same (a broadcast fit, or none: the default). An engine that chooses none ignores it.
  virtual void set_cost(const LinkCost& c) { (void)c; }
};

struct AllreduceOptions {
  int64_t min_segment_bytes = int64_t{64} << 10;
  int64_t max_segment_bytes = int64_t{1} << 20;
  int64_t window_bytes = int64_t{4} << 20;  // in flight to one owner (at least 2 segments)
  // The segment of a chunk of `chunk_bytes`, and how many may be in flight to one owner.
  int64_t segment_for(int64_t chunk_bytes) const {
    return std::clamp(chunk_bytes / 16, min_segment_bytes, std::max(min_segment_bytes, max_segment_bytes));
  }
  int64_t window_for(int64_t segment) const { return std::max<int64_t>(2, window_bytes / segment); }
};

class RankOrderAllreduce final : public Allreduce {
 public:
  enum class Algo { kDirect, kSegmented };
  // Over ranks 0 .. ranks-1 of the channel's transport (ranks beyond take no part).
  RankOrderAllreduce(Channel& ch, int ranks, AllreduceOptions opt = {});
  void run(std::span<float> data, int64_t id) override;
  std::string name() const override { return "sfb"; }
  // The cost the size choice uses; every rank must set the same (a broadcast fit, or the default).
  void set_cost(const LinkCost& c) override { cost_ = c; }
  Algo algo_for(int64_t bytes) const;

 private:
  using Head = AllreduceHead;
  void direct(std::span<float> data, int64_t id);
  void segmented(std::span<float> data, int64_t id);
  Message next(int64_t id, Head& head);
  SharedBytes encode(const Head& h, const float* values) const;

  Channel& ch_;
  const int P_;
  const AllreduceOptions opt_;
  LinkCost cost_;
  std::vector<float> sum_;           // scratch: a rank-order sum
  std::vector<const float*> ranks_;  // scratch: each rank's values in that sum
};

// Makes the all-reduce engine of a channel over its first `ranks` ranks (comm.collectives).
using AllreduceFactory = std::function<std::unique_ptr<Allreduce>(Channel& ch, int ranks)>;
std::unique_ptr<Allreduce> make_rank_order_allreduce(Channel& ch, int ranks);

}  // namespace sfb::comm
