#pragma once
// Which training rows each rank holds (data.partition) and which rows rank 0 evaluates the
// objective on (eval.train_sample). Both come from one seeded permutation pi of the N training
// rows that depends on N and the seed only, never on the number of ranks:
//  * "shuffled" (the default): rank r of P holds the rows pi(i) for i in partition_range(N, r, P),
//    a uniform random 1/P of the file whatever order its rows are in (a file sorted by label gives
//    every rank every class). Resumed on another P, the same permutation is cut into other pieces:
//    every row is still on exactly one rank.
//  * "contiguous": rank r holds rows partition_range(N, r, P) in file order (what sfbd did before
//    the shuffle; a sorted file then gives each rank a few classes).
//  * the objective's sample: the rows pi(0), ..., pi(k - 1), read by rank 0 whatever the partition,
//    so the objective is of a uniform sample of the whole training set, the same for every P.
// Row lists are ascending (the readers read a file once, front to back, keeping the listed rows).
#include <cstdint>
#include <string>
#include <vector>
#include "sfb/core/config.h"

#include "sfb/io/dataset.h"

namespace sfb::io {

// Global row indices, ascending, without repeats.
using RowList = std::vector<int64_t>;

// A pseudo-random permutation of [0, n) evaluated one point at a time in O(1) memory: a 4-round
// Feistel network on the smallest even number of bits covering n, walking the cycle until the
// value falls inside [0, n) (under 4 steps on average). The same on every machine: it uses only
// integer arithmetic of fixed width.
class RowPermutation {
 public:
  RowPermutation(int64_t n, uint64_t seed);
  int64_t size() const { return n_; }
  int64_t operator()(int64_t i) const;

 private:
  uint64_t encrypt(uint64_t x) const;
  int64_t n_;
  int half_bits_ = 1;
  uint64_t mask_ = 1;
  uint64_t keys_[4] = {};
};

// The seed of the permutation for a job seed (the job's other random streams stay independent).
uint64_t partition_seed(uint64_t job_seed);

// Rank `rank` of `size`'s rows of n under data.partition = `mode`.
RowList partition_rows(int64_t n, int rank, int size, Partition mode, uint64_t seed);
// The objective's sample: min(k, n) rows, the first of the permutation.
RowList sample_rows(int64_t n, int64_t k, uint64_t seed);
// Rows [r.begin, r.end).
RowList range_rows(Range r);

}  // namespace sfb::io
