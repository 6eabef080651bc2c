#pragma once
// BatchSfWriter: the runtime's SfWriter. It fills an SfBatch (sfb/core/sf_batch.h), checks every
// call (shapes, pair indices, sparse index order, every pair written before commit) with an
// InvalidArgument naming the call, and hands the committed batch to a sink.
//
// Used by the SF-compute thread only; not thread-safe.
#include <functional>
#include <memory>
#include <vector>

#include "sfb/api/sf_writer.h"
#include "sfb/core/sf_batch.h"

namespace sfb::api {

class BatchSfWriter final : public SfWriter {
 public:
  using Sink = std::function<void(SfBatchPtr)>;
  BatchSfWriter(int32_t J, int32_t D, Sink sink);

  // Starts a batch of `count` pairs for `clock`; u is multiplied by `u_scale` when written.
  void begin(int32_t sender, int64_t clock, int32_t count, float u_scale, bool sparse_v);

  int32_t count() const override { return batch_ ? batch_->count : 0; }
  int32_t J() const override { return J_; }
  int32_t D() const override { return D_; }
  bool sparse_v() const { return batch_ && batch_->sparse_v; }
  void write_u(int32_t i, std::span<const float> u) override;
  void write_v(int32_t i, std::span<const float> v) override;
  void write_v(int32_t i, std::span<const int32_t> index, std::span<const float> value) override;
  void write_u_block(const Matrix& u) override;
  void write_v_block(const Matrix& v) override;
  void commit() override;

  bool committed() const { return committed_; }

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
