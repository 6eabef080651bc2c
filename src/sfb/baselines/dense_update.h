#pragma once
// The dense update matrix of one SF batch, dW = U^T V (J x D), which the baselines move instead of
// the factors: FMS pushes it to the servers, all-reduce sums it over the workers. It is formed in
// the workers' layout of W (sfb/core/tensor.h): J x D row-major, or dW^T = V^T U (D x J)
// feature-major, so that its rows are the stored matrix's rows the exchanges shard and add.
#include "sfb/core/sf_batch.h"

namespace sfb::baselines {

// out = U^T V of `b` in `layout` (resized to the stored shape).
void dense_update(const SfBatch& b, Layout layout, Matrix& out);
// Stored rows [row_begin, row_begin + rows) of the update into `block` (resized to rows x the stored
// columns): the baselines form their update block by block (the all-reduce while earlier blocks are
// on the wire, FMS as it pushes each block), so no W-sized update is ever held.
void dense_update_rows(const SfBatch& b, Layout layout, int64_t row_begin, int64_t rows, Matrix& block);

}  // namespace sfb::baselines
