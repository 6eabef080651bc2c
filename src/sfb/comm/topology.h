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
};

}  // namespace sfb::comm
