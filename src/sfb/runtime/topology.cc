#include "sfb/runtime/topology.h"

#include <algorithm>

#include "sfb/core/error.h"
#include "sfb/core/halton.h"

namespace sfb::runtime {

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

// Rotating: p's i-th receiver at `clock` (i < q).
int Topology::rotating_receiver(int p, int64_t clock, int i) const {
  const int P = size();
  return (p + cycle[static_cast<size_t>((clock * q + i) % (P - 1))]) % P;
}

bool Topology::sends_data(int p, int dst, int64_t clock) const {
  if (!rotating) return true;
  for (int i = 0; i < q; ++i)
    if (rotating_receiver(p, clock, i) == dst) return true;
  return false;
}

std::vector<int> Topology::data_receivers(int p, int64_t clock) const {
  if (!rotating) return out[static_cast<size_t>(p)];
  std::vector<int> r;
  for (int i = 0; i < q; ++i) r.push_back(rotating_receiver(p, clock, i));
  return r;
}

std::vector<std::vector<int>> Topology::islands() const {
  const int P = size();
  std::vector<int> parent(static_cast<size_t>(P));
  for (int p = 0; p < P; ++p) parent[static_cast<size_t>(p)] = p;
  const auto find = [&](int x) {
    while (parent[static_cast<size_t>(x)] != x)
      x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  };
  // A rotating topology's data edges over one full turn of the cycle are all offsets.
  const int64_t clocks = rotating ? P - 1 : 1;
  for (int p = 0; p < P; ++p)
    for (int64_t c = 0; c < clocks; ++c)
      for (int q2 : data_receivers(p, c)) parent[static_cast<size_t>(find(p))] = find(q2);
  std::vector<std::vector<int>> groups;
  std::vector<int> group_of(static_cast<size_t>(P), -1);
  for (int p = 0; p < P; ++p) {
    const int root = find(p);
    if (group_of[static_cast<size_t>(root)] < 0) {
      group_of[static_cast<size_t>(root)] = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    groups[static_cast<size_t>(group_of[static_cast<size_t>(root)])].push_back(p);
  }
  return groups;
}

std::vector<int> Topology::halton_offsets(int size, int q) {
  SFB_ENFORCE(size >= 1, "size {}", size);
  q = sfb::halton_receivers(size, q);
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

}  // namespace sfb::runtime

namespace sfb::runtime {

std::vector<int> Topology::halton_cycle(int size) {
  SFB_ENFORCE(size >= 1, "size {}", size);
  return halton_offsets(size, size - 1);
}

Topology Topology::halton_rotating(int size, int q) {
  Topology t = full(size);
  t.name = "halton-rotating";
  if (size <= 1) return t;
  t.rotating = true;
  t.cycle = halton_cycle(size);
  t.q = static_cast<int>(halton_offsets(size, q).size());
  return t;
}

}  // namespace sfb::runtime
