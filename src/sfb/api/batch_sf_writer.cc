#include "sfb/api/batch_sf_writer.h"

#include <algorithm>

#include "sfb/core/error.h"

namespace sfb::api {

BatchSfWriter::BatchSfWriter(int32_t J, int32_t D, Sink sink) : J_(J), D_(D), sink_(std::move(sink)) {}

void BatchSfWriter::begin(int32_t sender, int64_t clock, int32_t count, float u_scale, bool sparse_v) {
  SFB_ENFORCE(committed_, "begin() before the previous batch (clock {}) was committed", batch_ ? batch_->clock : -1);
  batch_ = std::make_shared<SfBatch>();
  batch_->sender = sender;
  batch_->clock = clock;
  batch_->count = count;
  batch_->J = J_;
  batch_->D = D_;
  batch_->sparse_v = sparse_v;
  batch_->u.resize(count, J_);
  if (sparse_v)
    batch_->v_row_ptr.assign(1, 0);
  else
    batch_->v.resize(count, D_);
  u_scale_ = u_scale;
  u_done_.assign(static_cast<size_t>(count), 0);
  v_done_.assign(static_cast<size_t>(count), 0);
  next_sparse_row_ = 0;
  committed_ = false;
}

void BatchSfWriter::write_u(int32_t i, std::span<const float> u) {
  SFB_CHECK(!committed_ && i >= 0 && i < batch_->count, "write_u({}): pair index outside [0, {}) or no open batch", i,
            batch_ ? batch_->count : 0);
  SFB_CHECK(static_cast<int32_t>(u.size()) == J_, "write_u({}): u has length {}, the model's J is {}", i, u.size(), J_);
  for (int32_t j = 0; j < J_; ++j) batch_->u(i, j) = u_scale_ * u[static_cast<size_t>(j)];
  u_done_[static_cast<size_t>(i)] = 1;
}

void BatchSfWriter::write_v(int32_t i, std::span<const float> v) {
  SFB_CHECK(!committed_ && i >= 0 && i < batch_->count, "write_v({}): pair index outside [0, {}) or no open batch", i,
            batch_ ? batch_->count : 0);
  SFB_CHECK(!batch_->sparse_v,
            "write_v({}, v): dense v, but this model declares sparse v (Model::sparse_v() is true): write "
            "write_v(i, index, value), or return false from sparse_v()",
            i);
  SFB_CHECK(static_cast<int32_t>(v.size()) == D_, "write_v({}): v has length {}, the model's D is {}", i, v.size(), D_);
  std::copy(v.begin(), v.end(), batch_->v.row(i).data());
  v_done_[static_cast<size_t>(i)] = 1;
}

void BatchSfWriter::write_v(int32_t i, std::span<const int32_t> index, std::span<const float> value) {
  SFB_CHECK(!committed_ && batch_->sparse_v, "write_v({}, index, value): {}", i,
            committed_ ? "the batch was already committed"
                       : "sparse v, but this model declares dense v "
                         "(Model::sparse_v() is false): return true from sparse_v() "
                         "to write sparse v, or write write_v(i, v)");
  SFB_CHECK(i == next_sparse_row_, "write_v({}): sparse v rows must be written in order, expected row {}", i,
            next_sparse_row_);
  SFB_CHECK(index.size() == value.size(), "write_v({}): {} indices but {} values", i, index.size(), value.size());
  for (size_t k = 0; k < index.size(); ++k) {
    SFB_CHECK(index[k] >= 0 && index[k] < D_ && (k == 0 || index[k] > index[k - 1]),
              "write_v({}): index {} at position {} is outside [0, {}) or not increasing", i, index[k], k, D_);
  }
  batch_->v_index.insert(batch_->v_index.end(), index.begin(), index.end());
  batch_->v_value.insert(batch_->v_value.end(), value.begin(), value.end());
  batch_->v_row_ptr.push_back(static_cast<int64_t>(batch_->v_index.size()));
  v_done_[static_cast<size_t>(i)] = 1;
  ++next_sparse_row_;
}

void BatchSfWriter::write_u_block(const Matrix& u) {
  SFB_CHECK(!committed_ && u.rows() == batch_->count && u.cols() == J_, "write_u_block: U is {}x{}, expected {}x{}",
            u.rows(), u.cols(), batch_ ? batch_->count : 0, J_);
  batch_->u.noalias() = u_scale_ * u;
  std::fill(u_done_.begin(), u_done_.end(), 1);
}

void BatchSfWriter::write_v_block(const Matrix& v) {
  SFB_CHECK(!committed_ && !batch_->sparse_v && v.rows() == batch_->count && v.cols() == D_,
            "write_v_block: V is {}x{}, expected a dense {}x{}", v.rows(), v.cols(), batch_ ? batch_->count : 0, D_);
  batch_->v = v;
  std::fill(v_done_.begin(), v_done_.end(), 1);
}

void BatchSfWriter::commit() {
  SFB_CHECK(!committed_, "commit() without an open batch");
  for (int32_t i = 0; i < batch_->count; ++i) {
    SFB_CHECK(u_done_[static_cast<size_t>(i)] && v_done_[static_cast<size_t>(i)],
              "commit(): pair {} of clock {} is missing {}", i, batch_->clock,
              u_done_[static_cast<size_t>(i)] ? "v" : "u");
  }
  committed_ = true;
  sink_(std::move(batch_));
}

}  // namespace sfb::api
