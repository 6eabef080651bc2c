#pragma once
// The samples of one SF computation: K rows gathered from the worker's partition, dense (K x D)
// or sparse (CSR), with their labels. Built by the SF-compute thread, read by the model.
#include <cstdint>
#include <vector>

#include "sfb/io/dataset.h"

namespace sfb::api {

struct MiniBatch {
  int64_t clock = 0;
  bool sparse = false;
  Matrix x;              // K x D when dense
  io::SparseRows x_csr;  // K x D when sparse
  std::vector<int32_t> labels;
  std::vector<int64_t> rows;  // row indices into the partition

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// Gathers `rows` of `data` into `out` (reusing its storage).
void gather(const io::Dataset& data, const std::vector<int64_t>& rows, MiniBatch& out);

}  // namespace sfb::api
