#pragma once
// Who sends sufficient factors to whom. out[p]: the peers p broadcasts to; in[p]: the peers
// whose batches p receives (and whose clocks p tracks for staleness).
#include <string>
#include <vector>

namespace sfb::comm {

struct Topology {
  std::string name;
  std::vector<std::vector<int>> out;
  std::vector<std::vector<int>> in;

  int size() const { return static_cast<int>(out.size()); }
  // Full broadcast: every rank sends to all P - 1 others.
  static Topology full(int size);
  // Halton partial broadcast (SFB paper): rank p sends to the Q peers (p + floor(P * h_k)) mod P
  // for the base-2 Halton (van der Corput) sequence h = 1/2, 1/4, 3/4, 1/8, 3/8, ..., skipping
  // offsets that are 0 or repeat. q <= 0 means ceil(log2 P). For P = 6, Q = 2: p+3 and p+1.
  static Topology halton(int size, int q);
  // The first `q` distinct non-zero offsets floor(P * h_k) (fewer when P - 1 < q).
  static std::vector<int> halton_offsets(int size, int q);
  static int default_halton_q(int size);
};

}  // namespace sfb::comm
