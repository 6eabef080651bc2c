#pragma once
// What a model's sufficient factors add up to, for gradient checks: runs one compute_sf and
// returns sum_i u_i v_i^T / K (u written unscaled), dense or sparse v alike.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "sfb/api/batch_sf_writer.h"
#include "sfb/api/model.h"

namespace sfb::testing {

// Every row of `data` as one minibatch of the given clock.
inline api::MiniBatch all_rows(const io::Dataset& data, int64_t clock = 0) {
  std::vector<int64_t> rows(static_cast<size_t>(data.n));
  for (int64_t i = 0; i < data.n; ++i) rows[static_cast<size_t>(i)] = i;
  api::MiniBatch batch;
  api::gather(data, rows, batch);
  batch.clock = clock;
  return batch;
}

inline Matrix sf_mean(api::Model& m, const Matrix& W, const api::MiniBatch& batch, float scale = 1.0f) {
  Matrix G = Matrix::Zero(W.rows(), W.cols());
  api::BatchSfWriter writer(static_cast<int32_t>(W.rows()), static_cast<int32_t>(W.cols()), [&](SfBatchPtr b) {
    for (int32_t i = 0; i < b->count; ++i) {
      if (!b->sparse_v) {
        G += b->u.row(i).transpose() * b->v.row(i);
      } else {
        for (int64_t k = b->v_row_ptr[i]; k < b->v_row_ptr[i + 1]; ++k)
          G.col(b->v_index[k]) += b->u.row(i).transpose() * b->v_value[k];
      }
    }
  });
  writer.begin(0, batch.clock, static_cast<int32_t>(batch.size()), 1.0f, m.sparse_v());
  m.compute_sf(api::Weights{W, scale}, batch, writer);
  EXPECT_TRUE(writer.committed());
  return G / static_cast<float>(batch.size());
}

}  // namespace sfb::testing
