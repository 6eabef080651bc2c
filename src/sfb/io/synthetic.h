#pragma once
// Synthetic classification data for any J, D and density: class y has a prototype mu_y in R^D
// whose entries are a hash of (seed, y, j) (no J x D table is stored); a sample of class y is
// x_j = sep * mu_y[j] + N(0, 1) (sep = separation / sqrt(support)) on its support (all of D, or round(density * D)
// random features), and a fraction `noise` of labels is replaced by a random class. Sample i depends only on (seed, i),
// so every rank generates exactly its own rows, for any number of ranks.
#include <cstdint>

#include "sfb/io/dataset.h"
#include "sfb/io/partition.h"

namespace sfb::io {

struct SyntheticSpec {
  int64_t samples = 0;
  int64_t features = 0;
  int64_t classes = 0;
  double density = 1.0;  // < 1: sparse rows
  double noise = 0.0;
  uint64_t seed = 0;
  uint64_t stream = 0;      // 0 for training data, 1 for test data
  double separation = 4.0;  // distance between class prototypes, in noise standard deviations
};

// Rows [begin, end) of the synthetic set; end = -1 means all.
Dataset make_synthetic(const SyntheticSpec& spec, int64_t begin = 0, int64_t end = -1);
// The listed rows (ascending), in that order.
Dataset make_synthetic(const SyntheticSpec& spec, const RowList& rows);

}  // namespace sfb::io
