#include "sfb/models/mlr.h"

#include <algorithm>
#include <cmath>

#include "sfb/core/error.h"

namespace sfb::models {
namespace {

// In place: each row of `logits` becomes softmax(row), computed stably (max subtracted).
void softmax_rows(Matrix& logits) {
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    auto row = logits.row(i);
    const float m = row.maxCoeff();
    row = (row.array() - m).exp();
    row /= row.sum();
  }
}

constexpr int64_t kEvalBlock = 4096;

}  // namespace

void Mlr::compute_sf(const Matrix& W, const api::MiniBatch& batch, api::SfWriter& out) {
  const auto k = batch.size();
  Matrix p;
  if (batch.sparse) p.noalias() = batch.x_csr * W.transpose();
  else p.noalias() = batch.x * W.transpose();
  softmax_rows(p);
  for (int64_t i = 0; i < k; ++i) p(i, batch.labels[static_cast<size_t>(i)]) -= 1.0f;
  out.write_u_block(p);
  if (!batch.sparse) {
    out.write_v_block(batch.x);
  } else {
    const auto* outer = batch.x_csr.outerIndexPtr();
    for (int64_t i = 0; i < k; ++i) {
      const auto b = outer[i], e = outer[i + 1];
      out.write_v(static_cast<int32_t>(i), std::span(batch.x_csr.innerIndexPtr() + b, static_cast<size_t>(e - b)),
                  std::span(batch.x_csr.valuePtr() + b, static_cast<size_t>(e - b)));
    }
  }
  out.commit();
}

Matrix Mlr::probabilities(const Matrix& W, const io::Dataset& data, int64_t begin, int64_t end) {
  SFB_ENFORCE(W.cols() == data.dim, "W has {} columns, data {} features", W.cols(), data.dim);
  Matrix logits;
  if (data.sparse) logits.noalias() = data.csr.middleRows(begin, end - begin) * W.transpose();
  else logits.noalias() = data.dense.middleRows(begin, end - begin) * W.transpose();
  softmax_rows(logits);
  return logits;
}

double Mlr::objective(const Matrix& W, const io::Dataset& data, int64_t limit) const {
  const int64_t n = (limit <= 0 || limit > data.n) ? data.n : limit;
  if (n == 0) return 0.0;
  double loss = 0.0;
  for (int64_t b = 0; b < n; b += kEvalBlock) {
    const int64_t e = std::min(n, b + kEvalBlock);
    const Matrix p = probabilities(W, data, b, e);
    for (int64_t i = b; i < e; ++i)
      loss -= std::log(std::max(p(i - b, data.labels[static_cast<size_t>(i)]), 1e-30f));
  }
  return loss / static_cast<double>(n);
}

double Mlr::accuracy(const Matrix& W, const io::Dataset& data) const {
  if (data.n == 0) return -1.0;
  int64_t correct = 0;
  for (int64_t b = 0; b < data.n; b += kEvalBlock) {
    const int64_t e = std::min(data.n, b + kEvalBlock);
    const Matrix p = probabilities(W, data, b, e);
    for (int64_t i = b; i < e; ++i) {
      Eigen::Index arg = 0;
      p.row(i - b).maxCoeff(&arg);
      correct += arg == data.labels[static_cast<size_t>(i)] ? 1 : 0;
    }
  }
  return static_cast<double>(correct) / static_cast<double>(data.n);
}

}  // namespace sfb::models
