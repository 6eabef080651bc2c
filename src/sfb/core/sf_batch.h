#pragma once
// One worker's sufficient factors for one clock: K pairs (u_i, v_i) with u_i in R^J and v_i in
// R^D, so that the update is dW = sum_i u_i v_i^T = U^T V. u is already scaled by the step size
// (the sender applies -eta_c / K), so every receiver rebuilds the same dW without knowing the
// sender's learning-rate schedule. v is dense (V is K x D) or sparse (CSR rows).
//
// Produced by the SF-compute thread (through api::SfWriter), shared read-only with the
// communication and update threads through std::shared_ptr<const SfBatch>.
#include <cstdint>
#include <memory>
#include <vector>

#include "sfb/core/tensor.h"

namespace sfb {

struct SfBatch {
  int32_t sender = 0;
  int64_t clock = 0;
  int32_t count = 0;  // K, number of pairs
  int32_t J = 0;
  int32_t D = 0;
  bool sparse_v = false;
  Matrix u;  // K x J
  Matrix v;  // K x D when dense, empty when sparse
  // CSR rows of V when sparse: row i spans [v_row_ptr[i], v_row_ptr[i+1]).
  std::vector<int64_t> v_row_ptr;
  std::vector<int32_t> v_index;
  std::vector<float> v_value;

  int64_t nnz_v() const { return sparse_v ? static_cast<int64_t>(v_index.size()) : int64_t{count} * D; }
};

using SfBatchPtr = std::shared_ptr<const SfBatch>;

}  // namespace sfb
