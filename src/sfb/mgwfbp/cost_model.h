#pragma once
// All-reduce cost model of MG-WFBP: T_ar(M) = a + b * M for a message of M bytes.
//
// Sources of a and b: a least-squares fit of measured times (an OSU log, or our own benchmark on
// the live communicator: allreduce_bench.h), or the alpha-beta model of an all-reduce algorithm
// (the MG-WFBP paper's Table II) from point-to-point latency alpha and per-byte time beta:
//   ring:               a = 2 (N-1) alpha          b = 2 (N-1)/N beta
//   recursive doubling: a = log2(N) alpha          b = log2(N) beta
//   binomial tree:      a = 2 log2(N) alpha        b = 2 log2(N) beta   (reduce + broadcast)
// (the reduction's own compute term gamma is left out).
//
// Hybrid transport (planner "hybrid"): a fully-connected layer's gradient can instead travel as
// its sufficient factors, all-gathered: T_ag(M) = ag_a + ag_b * M for M bytes per rank. From the
// same alpha and beta: ring and tree (N-1) alpha + (N-1) M beta, recursive doubling log2(N) alpha +
// (N-1) M beta (every rank receives the other N-1 ranks' M bytes). A fitted all-reduce model
// carries no all-gather term; with_ring_allgather() derives it by the ring relations
// (ag_a = a / 2, ag_b = b N / 2).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sfb::mgwfbp {

struct CostModel {
  double a_us = 0.0;              // start-up time, microseconds
  double b_us_per_byte = 0.0;     // microseconds per byte
  double ag_a_us = 0.0;           // all-gather start-up
  double ag_b_us_per_byte = 0.0;  // all-gather time per byte of one rank's contribution
  int nodes = 1;                  // ranks (the SF reconstruction rebuilds every rank's factors)
  double time_us(int64_t bytes) const { return bytes > 0 ? a_us + b_us_per_byte * static_cast<double>(bytes) : 0.0; }
  double allgather_us(int64_t bytes_per_rank) const {
    return bytes_per_rank > 0 ? ag_a_us + ag_b_us_per_byte * static_cast<double>(bytes_per_rank) : 0.0;
  }
};

// `c` (an all-reduce model, e.g. fitted) with the all-gather terms of a ring on `nodes` ranks.
CostModel with_ring_allgather(CostModel c, int nodes);

struct Sample {
  int64_t bytes = 0;
  double us = 0.0;
};

struct Fit {
  CostModel model;
  double r2 = 0.0;
  int used = 0;
};

// Ordinary least squares of us = a + b * bytes over samples with bytes >= min_bytes.
Fit fit_cost_model(const std::vector<Sample>& samples, int64_t min_bytes = 0);

// OSU micro-benchmark output ("bytes latency" or "N,bytes latency" rows; '#' comments).
std::vector<Sample> read_osu_log(const std::string& path);

enum class Algorithm { kRing, kRecursiveDoubling, kTree };
Algorithm parse_algorithm(const std::string& name);  // ring | rd | tree
CostModel alpha_beta_model(Algorithm algo, int nodes, double alpha_us, double beta_us_per_byte);

// Named networks for the simulator: point-to-point alpha and beta of a cluster interconnect, from
// the catalogue sfb-plan uses too (core/links.h): 1gbe, 10gbe, 25gbe, ib, 100gbe.
struct Network {
  std::string name;
  double alpha_us = 0.0;
  double beta_us_per_byte = 0.0;
};
// "10gbe": alpha 37 us (so that ring gives the 523 us start-up the MG-WFBP authors measured on 8
// nodes), beta at 10 Gbit/s line rate (8e-4 us/B). "ib": 56 Gbit/s FDR InfiniBand, alpha 7 us (the
// authors' 8-node start-up 97.5 us / 14), beta 1.43e-4 us/B.
Network named_network(const std::string& name);

}  // namespace sfb::mgwfbp
