#include "sfb/comm/topology.h"

#include <algorithm>

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

int Topology::default_halton_q(int size) {
  int q = 0;
  while ((1 << q) < size) ++q;
  return std::max(q, size > 1 ? 1 : 0);
}

std::vector<int> Topology::halton_offsets(int size, int q) {
  SFB_ENFORCE(size >= 1, "size {}", size);
  if (q <= 0) q = default_halton_q(size);
  q = std::min(q, size - 1);
  std::vector<int> offsets;
  std::vector<char> seen(static_cast<size_t>(size), 0);
  seen[0] = 1;
  // Van der Corput in base 2: h = 1/2, 1/4, 3/4, 1/8, 3/8, 5/8, 7/8, 1/16, ... (numerators odd).
  for (int64_t den = 2; static_cast<int>(offsets.size()) < q; den *= 2) {
    for (int64_t num = 1; num < den && static_cast<int>(offsets.size()) < q; num += 2) {
      const auto off = static_cast<int>((static_cast<int64_t>(size) * num) / den);
      if (seen[static_cast<size_t>(off)]) continue;
      seen[static_cast<size_t>(off)] = 1;
      offsets.push_back(off);
    }
    SFB_ENFORCE(den < (int64_t{1} << 40), "no {} distinct Halton offsets for P = {}", q, size);
  }
  return offsets;
}

Topology Topology::halton(int size, int q) {
  Topology t;
  t.name = "halton";
  t.out.resize(static_cast<size_t>(size));
  t.in.resize(static_cast<size_t>(size));
  for (int off : halton_offsets(size, q)) {
    for (int p = 0; p < size; ++p) {
      const int dst = (p + off) % size;
      t.out[static_cast<size_t>(p)].push_back(dst);
      t.in[static_cast<size_t>(dst)].push_back(p);
    }
  }
  for (auto& v : t.in) std::sort(v.begin(), v.end());
  return t;
}

}  // namespace sfb::comm
