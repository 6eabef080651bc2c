#pragma once
// The dense update matrix of one SF batch, dW = U^T V (J x D), which the baselines move instead of
// the factors: FMS pushes it to the servers, all-reduce sums it over the workers.
#include "sfb/core/sf_batch.h"

namespace sfb::baselines {

// out = U^T V of `b` (resized to J x D).
void dense_update(const SfBatch& b, Matrix& out);
// Rows [row_begin, row_begin + rows) of U^T V into the same rows of `out` (already J x D): the
// all-reduce baseline forms its update block by block while earlier blocks are on the wire.
void dense_update_rows(const SfBatch& b, int64_t row_begin, int64_t rows, Matrix& out);

}  // namespace sfb::baselines
