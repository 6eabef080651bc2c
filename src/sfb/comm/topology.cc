#include "sfb/comm/topology.h"

#include "sfb/core/error.h"

namespace sfb::comm {

Topology Topology::full(int size) {
  SFB_ENFORCE(size >= 1, "size {}", size);
  Topology t;
  t.name = "full";
  t.out.resize(static_cast<size_t>(size));
  t.in.resize(static_cast<size_t>(size));
  for (int p = 0; p < size; ++p) {
    for (int q = 0; q < size; ++q) {
      if (q == p) continue;
      t.out[static_cast<size_t>(p)].push_back(q);
      t.in[static_cast<size_t>(q)].push_back(p);
    }
  }
  return t;
}

}  // namespace sfb::comm
