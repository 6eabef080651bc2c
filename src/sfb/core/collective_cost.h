#pragma once
// The all-reduce's choice of algorithm by size and the bytes each algorithm sends, in one place for
// the engine that runs it (comm/allreduce.h) and the planner and simulator that predict it
// (mgwfbp): the two must agree, or predicted bytes and times describe another algorithm.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace sfb {

// One point-to-point step of a collective: a microseconds + b microseconds per byte.
struct LinkCost {
  double a_us = 50.0;
  double b_us_per_byte = 8.4e-3;  // 1 Gbit/s
};

// The per-step cost from a fit of whole all-reduces T(M) = A + B M on P ranks (two steps, each
// moving 2 (P - 1) / P of the bytes... per rank in the segmented algorithm): a = A / 2, and b the
// link's time per byte. The default when the fit has no slope.
inline LinkCost link_cost_from_fit(double A_us, double B_us_per_byte, int P) {
  LinkCost c;
  if (P < 2 || !(B_us_per_byte > 0)) return c;
  c.a_us = std::max(0.0, A_us) / 2;
  c.b_us_per_byte = B_us_per_byte * P / (2.0 * (P - 1));
  return c;
}

// The direct algorithm (every rank sends its whole buffer to every other: one step, (P - 1) M
// bytes out) against the segmented one (two steps, 2 (P - 1) / P M out): direct when it is not
// slower, and always for P <= 2 (where both send M).
inline double allreduce_direct_us(int64_t bytes, int P, const LinkCost& c) {
  return c.a_us + (P - 1.0) * static_cast<double>(bytes) * c.b_us_per_byte;
}
inline double allreduce_segmented_us(int64_t bytes, int P, const LinkCost& c) {
  return 2 * c.a_us + 2 * (P - 1.0) / P * static_cast<double>(bytes) * c.b_us_per_byte;
}
inline bool allreduce_direct(int64_t bytes, int P, const LinkCost& c) {
  return P <= 2 || allreduce_direct_us(bytes, P, c) <= allreduce_segmented_us(bytes, P, c);
}
// An all-reduce of `bytes` on P ranks by the algorithm allreduce_direct picks, microseconds.
inline double allreduce_us(int64_t bytes, int P, const LinkCost& c) {
  return allreduce_direct(bytes, P, c) ? allreduce_direct_us(bytes, P, c) : allreduce_segmented_us(bytes, P, c);
}

// Payload bytes one rank sends in an all-reduce of `bytes` on P ranks.
inline int64_t allreduce_bytes_sent(int64_t bytes, int P, bool direct) {
  if (P <= 1) return 0;
  return direct ? (P - 1) * bytes : 2 * (P - 1) * bytes / P;
}

// Partial broadcast's reconciliation period when sfb.reconcile_every = 0 ("auto"): the period at
// which the all-reduce of W sends at most `budget` of the factor bytes partial broadcast sends:
// 2 (P - 1) / P J D floats every R clocks against Q K (J + nnz(v)) floats a clock (nnz(v) = D for
// dense v). 0 when nothing is partial.
inline int64_t auto_reconcile_every(int workers, int q, int64_t K, int64_t J, int64_t D, double v_nonzeros,
                                    double budget = 0.1) {
  if (workers <= 1 || q <= 0 || budget <= 0) return 0;
  const double reduce = 2.0 * (workers - 1) / workers * static_cast<double>(J) * static_cast<double>(D);
  const double factors = static_cast<double>(q) * static_cast<double>(K) *
                         (static_cast<double>(J) + std::min(v_nonzeros, static_cast<double>(D)));
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(reduce / (budget * factors))));
}

// W's all-reduces go in row blocks, so no W-sized buffer exists beside W (docs/design.md,
// "Memory"): the dense baseline's blocks are a thirty-second of W's `w_bytes`, 1 - 32 MiB, with
// kDenseAllreduceBlocksInFlight of them formed, reduced or waiting to be applied; the
// reconciliation's a sixteenth, 1 - 16 MiB, one at a time. The engines and the memory estimate
// take their sizes from here.
inline constexpr int kDenseAllreduceBlocksInFlight = 4;
inline int64_t dense_allreduce_block_bytes(int64_t w_bytes) {
  return std::clamp<int64_t>(w_bytes / 32, int64_t{1} << 20, int64_t{32} << 20);
}
inline int64_t reconcile_block_bytes(int64_t w_bytes) {
  return std::clamp<int64_t>(w_bytes / 16, int64_t{1} << 20, int64_t{16} << 20);
}

// FMS pushes and pulls a server's shard in blocks of an eighth of it, 64 KiB - 1 MiB
// (baselines/ps_codec.h rounds them to whole rows; the predictor's pipeline uses the bytes).
inline constexpr int64_t kPsBlockBytes = int64_t{1} << 20;
inline constexpr int64_t kPsMinBlockBytes = int64_t{64} << 10;
inline int64_t ps_block_bytes(int64_t shard_bytes) {
  return std::clamp(std::max<int64_t>(0, shard_bytes) / 8, kPsMinBlockBytes, kPsBlockBytes);
}
// A worker keeps at most kPsWindowBlocks blocks per server pushed and not yet pulled back
// (baselines/fms_exchange.h, without a prox that needs whole clocks; ps_rounds in row_blocks.h).
inline constexpr int64_t kPsWindowBlocks = 4;

}  // namespace sfb
