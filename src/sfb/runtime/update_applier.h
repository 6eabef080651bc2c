#pragma once
// The update kernel: W += U^T V for one SfBatch (u already carries the step). Dense v is one
// GEMM (J x K times K x D); sparse v walks W row by row so each write is contiguous, touching
// only the columns that appear. Runs on the update thread with W write-locked.
#include "sfb/core/sf_batch.h"
#include "sfb/core/tensor.h"

namespace sfb::runtime {

void apply_batch(Matrix& W, const SfBatch& b, int threads);

}  // namespace sfb::runtime
