#pragma once
// Who sends sufficient factors to whom. out[p]: the peers p sends a batch to every clock; in[p]:
// the peers whose batches p receives (and whose clocks p tracks for staleness).
//
// A rotating topology changes its receivers with the clock: out[p] and in[p] are then every peer,
// and sends_data(p, q, c) says whether p's clock-c batch to q carries p's sufficient factors or is
// an empty batch that only marks the clock (a few dozen bytes). Every sender therefore still
// delivers one batch per clock to every in-neighbour, in clock order, which keeps the worker's
// per-sender clock accounting, the staleness gate and the BSP apply order exactly as for a static
// topology, while the factors themselves reach Q peers per clock.
#include <cstdint>
#include <string>
#include <vector>

namespace sfb::runtime {

struct Topology {
  std::string name;
  std::vector<std::vector<int>> out;
  std::vector<std::vector<int>> in;

  // Rotating Halton: clock c's receivers of p are p + cycle[(c Q + i) mod (P - 1)], i < Q.
  bool rotating = false;
  int q = 0;
  std::vector<int> cycle;

  int size() const { return static_cast<int>(out.size()); }
  // Whether p's batch of clock `clock` to its out-neighbour `dst` carries data (always, unless
  // rotating).
  bool sends_data(int p, int dst, int64_t clock) const;
  // The peers that receive p's factors at `clock` (out[p] unless rotating).
  std::vector<int> data_receivers(int p, int64_t clock) const;
  // How many peers receive a worker's factors each clock (Q; P - 1 under full broadcast).
  int receivers_per_clock() const { return rotating ? q : (out.empty() ? 0 : static_cast<int>(out[0].size())); }
  // The weakly connected components of the graph of data edges over all clocks, each ascending,
  // ordered by their smallest rank. For circulant graphs (every topology here) these are also the
  // strongly connected ones: one component means every rank's factors reach every other rank.
  std::vector<std::vector<int>> islands() const;

  // Full broadcast: every rank sends to all P - 1 others.
  static Topology full(int size);
  // Halton partial broadcast (SFB paper): rank p sends to the Q peers (p + floor(P * h_k)) mod P
  // for the base-2 Halton (van der Corput) sequence h = 1/2, 1/4, 3/4, 1/8, 3/8, ..., skipping
  // offsets that are 0 or repeat. q <= 0 means ceil(log2 P). For P = 6, Q = 2: p+3 and p+1.
  static Topology halton(int size, int q);
  // Rotating Halton: clock 0 uses the static offsets, and each clock advances Q places along
  // halton_cycle(P), so every sender reaches every peer within ceil((P - 1) / Q) clocks.
  static Topology halton_rotating(int size, int q);
  // Every non-zero offset 1..P-1 once, in the order floor(P h_k) first reaches it.
  static std::vector<int> halton_cycle(int size);
  // The first `q` distinct non-zero offsets floor(P * h_k) (fewer when P - 1 < q).
  static std::vector<int> halton_offsets(int size, int q);

 private:
  int rotating_receiver(int p, int64_t clock, int i) const;
};

}  // namespace sfb::runtime
