#pragma once
// SfWriter: how a model hands its sufficient factors to the runtime. For one SF computation
// (one clock) the model writes K pairs, u_i (length J) and v_i (length D, dense or sparse), and
// then calls commit(). The runtime scales every u by the step (-eta_c / K) so the batch's update
// is simply dW = sum_i u_i v_i^T.
//
// Used by the SF-compute thread only; not thread-safe.
#include <cstdint>
#include <functional>
#include <span>

#include "sfb/core/sf_batch.h"

namespace sfb::api {

class SfWriter {
 public:
  using Sink = std::function<void(SfBatchPtr)>;
  SfWriter(int32_t J, int32_t D, Sink sink);

  // Starts a batch of `count` pairs for `clock`; u is multiplied by `u_scale` when written.
  void begin(int32_t sender, int64_t clock, int32_t count, float u_scale, bool sparse_v);

  void write_u(int32_t i, std::span<const float> u);
  void write_v(int32_t i, std::span<const float> v);                                   // dense v
  void write_v(int32_t i, std::span<const int32_t> index, std::span<const float> value);  // sparse v
  // All K rows at once (K x J and K x D): the matrix form of write_u / write_v.
  void write_u_block(const Matrix& u);
  void write_v_block(const Matrix& v);
  // Ends the batch: checks every pair was written and hands the batch to the runtime.
  void commit();

  bool committed() const { return committed_; }
  int32_t J() const { return J_; }
  int32_t D() const { return D_; }

 private:
  int32_t J_, D_;
  Sink sink_;
  std::shared_ptr<SfBatch> batch_;
  float u_scale_ = 1.0f;
  std::vector<char> u_done_, v_done_;
  int32_t next_sparse_row_ = 0;
  bool committed_ = true;
};

}  // namespace sfb::api
