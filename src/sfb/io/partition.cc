#include "sfb/io/partition.h"

#include <algorithm>
#include <numeric>

#include "sfb/core/error.h"
#include "sfb/core/rng.h"

namespace sfb::io {

RowPermutation::RowPermutation(int64_t n, uint64_t seed) : n_(n) {
  SFB_ENFORCE(n >= 0, "permutation of {} rows", n);
  // 2 * half_bits bits cover [0, n): the domain is at most 4 n, so the walk is short.
  while (half_bits_ < 31 && (uint64_t{1} << (2 * half_bits_)) < static_cast<uint64_t>(n)) ++half_bits_;
  mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t k = seed;
  for (auto& key : keys_) key = k = splitmix64(k + 0x243F6A8885A308D3ULL);
}

uint64_t RowPermutation::encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & mask_;
  for (const uint64_t key : keys_) {
    const uint64_t next = left ^ (splitmix64(right ^ key) & mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t RowPermutation::operator()(int64_t i) const {
  SFB_ENFORCE(i >= 0 && i < n_, "row {} of a permutation of {}", i, n_);
  // Cycle walking: the Feistel network permutes [0, 4^half_bits); following the cycle of i until
  // it re-enters [0, n) permutes [0, n).
  uint64_t x = static_cast<uint64_t>(i);
  do x = encrypt(x);
  while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

uint64_t partition_seed(uint64_t job_seed) { return splitmix64(job_seed ^ 0x9a7d17e5ULL); }

RowList range_rows(Range r) {
  RowList rows(static_cast<size_t>(std::max<int64_t>(0, r.size())));
  std::iota(rows.begin(), rows.end(), r.begin);
  return rows;
}

RowList partition_rows(int64_t n, int rank, int size, Partition mode, uint64_t seed) {
  const Range r = partition_range(n, rank, size);
  if (mode == Partition::kContiguous) return range_rows(r);
  const RowPermutation pi(n, seed);
  RowList rows;
  rows.reserve(static_cast<size_t>(r.size()));
  for (int64_t i = r.begin; i < r.end; ++i) rows.push_back(pi(i));
  std::sort(rows.begin(), rows.end());
  return rows;
}

RowList sample_rows(int64_t n, int64_t k, uint64_t seed) {
  const RowPermutation pi(n, seed);
  const int64_t m = std::clamp<int64_t>(k, 0, n);
  RowList rows;
  rows.reserve(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) rows.push_back(pi(i));
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace sfb::io
