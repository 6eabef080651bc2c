#pragma once
// The dense update matrix of one SF batch, dW = U^T V (J x D), which the baselines move instead of
// the factors: FMS pushes it to the servers, all-reduce sums it over the workers.
#include "sfb/core/sf_batch.h"

namespace sfb::baselines {

// out = U^T V of `b` (resized to J x D).
void dense_update(const SfBatch& b, Matrix& out);

}  // namespace sfb::baselines
