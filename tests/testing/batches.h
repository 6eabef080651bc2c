#pragma once
// SF batches for the codec and wire tests: dense or sparse v, shape taken from the factors.
#include <cstdint>
#include <vector>

#include "sfb/core/sf_batch.h"

namespace sfb::testing {

inline SfBatch dense_sf_batch(int32_t sender, int64_t clock, Matrix u, Matrix v) {
  SfBatch b;
  b.sender = sender;
  b.clock = clock;
  b.count = static_cast<int32_t>(u.rows());
  b.J = static_cast<int32_t>(u.cols());
  b.D = static_cast<int32_t>(v.cols());
  b.u = std::move(u);
  b.v = std::move(v);
  return b;
}

// v as CSR rows: row i is index/value[row_ptr[i] .. row_ptr[i + 1]).
inline SfBatch sparse_sf_batch(int32_t sender, int64_t clock, int32_t D, Matrix u, std::vector<int64_t> row_ptr,
                               std::vector<int32_t> index, std::vector<float> value) {
  SfBatch b;
  b.sender = sender;
  b.clock = clock;
  b.count = static_cast<int32_t>(u.rows());
  b.J = static_cast<int32_t>(u.cols());
  b.D = D;
  b.sparse_v = true;
  b.u = std::move(u);
  b.v_row_ptr = std::move(row_ptr);
  b.v_index = std::move(index);
  b.v_value = std::move(value);
  return b;
}

}  // namespace sfb::testing
