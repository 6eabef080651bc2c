#pragma once
// SfWriter: how a model hands its sufficient factors to the runtime. For one SF computation
// (one clock) the model writes K pairs, u_i (length J) and v_i (length D, dense or sparse), and
// then calls commit(). For gradient models the runtime scales every u by the step (-eta_c / K),
// so the batch's update is simply dW = sum_i u_i v_i^T (Model::update_rule()).
//
// Part of the plugin ABI (sfb/api/plugin.h): an interface of virtual calls only, so a plugin
// built out of tree links nothing of sfb. The runtime's implementation is BatchSfWriter.
// Used by the SF-compute thread only; not thread-safe.
#include <cstdint>
#include <span>
#include <vector>

#include "sfb/core/tensor.h"

namespace sfb::api {

class SfWriter {
 public:
  virtual ~SfWriter() = default;
  // Number of pairs expected in this batch (K), and the shape of u and v.
  virtual int32_t count() const = 0;
  virtual int32_t J() const = 0;
  virtual int32_t D() const = 0;
  virtual void write_u(int32_t i, std::span<const float> u) = 0;
  virtual void write_v(int32_t i, std::span<const float> v) = 0;  // dense v
  // Sparse v: strictly increasing indices in [0, D); rows written in order 0, 1, ...
  virtual void write_v(int32_t i, std::span<const int32_t> index, std::span<const float> value) = 0;
  // All K rows at once (K x J and K x D): the matrix form of write_u / write_v.
  virtual void write_u_block(const Matrix& u) = 0;
  virtual void write_v_block(const Matrix& v) = 0;
  // Ends the batch: checks every pair was written and hands the batch to the runtime.
  virtual void commit() = 0;
};

// Writes row i of `v` (K x D, dense) as sparse v_i: only its non-zero entries go on the wire. For
// models whose v has many exact zeros (sparse codes, differences of sparse rows).
inline void write_v_nonzeros(SfWriter& out, const Matrix& v) {
  std::vector<int32_t> idx;
  std::vector<float> val;
  for (int64_t i = 0; i < v.rows(); ++i) {
    idx.clear();
    val.clear();
    for (int64_t c = 0; c < v.cols(); ++c) {
      if (v(i, c) != 0.0f) {
        idx.push_back(static_cast<int32_t>(c));
        val.push_back(v(i, c));
      }
    }
    out.write_v(static_cast<int32_t>(i), idx, val);
  }
}

}  // namespace sfb::api
