#pragma once
// Deterministic random streams: every (seed, stream) pair gives an independent, reproducible
// generator, so rank r's minibatches depend only on the job seed and r.
#include <cstdint>
#include <random>

namespace sfb {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

using Rng = std::mt19937_64;

inline Rng make_rng(uint64_t seed, uint64_t stream) { return Rng(splitmix64(seed ^ splitmix64(stream + 1))); }

}  // namespace sfb
