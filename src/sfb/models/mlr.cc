#include "sfb/models/mlr.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sfb/core/error.h"
#include "sfb/core/gathered_sum.h"
#include "sfb/core/gemm.h"

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

// Rows evaluated together: 4096, or fewer so that a block's probabilities (rows x J floats) stay
// within 16 MiB (at J = 100,000 a block of 4096 rows would be 1.6 GB, half of W).
int64_t eval_block(int64_t J) {
  return std::clamp<int64_t>((int64_t{16} << 20) / (4 * std::max<int64_t>(J, 1)), 16, 4096);
}

// logits = X W^T for sparse rows X. Row-major W: row of W by row of W. Eigen's sparse x dense
// product walks a column of W^T (a column of W: stride D floats, a new page per element when D is
// large) per non-zero; here each row of W is read once for all K samples, so the accesses stay in
// one row (measured 5x faster for J = 2,000, D = 20,000, 1% density). Feature-major W: a sample's
// logits are the sum of its non-zeros' stored rows (contiguous, core/gathered_sum.h). Both
// accumulate each logit from 0 over the row's non-zeros in order: the same floats.
template <typename Rows>
void sparse_logits(const Rows& x, const api::Weights& W, Matrix& out) {
  const int64_t k = x.rows();
  const int64_t J = W.rows();
  out.resize(k, J);
  const auto* outer = x.outerIndexPtr();
  const auto* inner = x.innerIndexPtr();
  const auto* value = x.valuePtr();
  const Matrix& S = W.stored;
  if (!W.row_major()) {
    static_assert(sizeof(*inner) == sizeof(int32_t), "CSR indices are int32");
    out.setZero();
    for (int64_t i = 0; i < k; ++i)
      add_gathered(J, outer[i + 1] - outer[i], value + outer[i], reinterpret_cast<const int32_t*>(inner + outer[i]),
                   S.data(), J, out.data() + i * J);
    return;
  }
  // Blocks of 64 samples keep their non-zeros in L2 while every row of W passes by.
  for (int64_t i0 = 0; i0 < k; i0 += 64) {
    const int64_t i1 = std::min(k, i0 + 64);
    for (int64_t j = 0; j < J; ++j) {
      const float* w = S.data() + j * S.cols();
      for (int64_t i = i0; i < i1; ++i) {
        float acc = 0.0f;
        for (auto e = outer[i]; e < outer[i + 1]; ++e) acc += value[e] * w[inner[e]];
        out(i, j) = acc;
      }
    }
  }
}

// logits = X W^T for `k` dense rows x (k x D, row-major): one GEMM in either layout.
void dense_logits(const float* x, int64_t k, const api::Weights& W, Matrix& out) {
  const int64_t J = W.rows(), D = W.cols();
  out.resize(k, J);
  gemm(Op::kNone, W.row_major() ? Op::kTranspose : Op::kNone, k, J, D, 1.0f, x, D, W.stored.data(), W.stored.cols(),
       0.0f, out.data(), J);
}

}  // namespace

void Mlr::logits(const api::Weights& W, const api::MiniBatch& batch, Matrix& out) {
  if (batch.sparse)
    sparse_logits(batch.x_csr, W, out);
  else
    dense_logits(batch.x.data(), batch.size(), W, out);  // K x J logits
  if (W.scale != 1.0f) out *= W.scale;
}

Matrix Mlr::probabilities(const api::Weights& W, const api::MiniBatch& batch) {
  Matrix p;
  logits(W, batch, p);
  softmax_rows(p);
  return p;
}

void Mlr::write_x_as_v(const api::MiniBatch& batch, api::SfWriter& out) {
  if (!batch.sparse) {
    out.write_v_block(batch.x);
    return;
  }
  const auto* outer = batch.x_csr.outerIndexPtr();
  for (int64_t i = 0; i < batch.size(); ++i) {
    const auto b = outer[i], e = outer[i + 1];
    out.write_v(static_cast<int32_t>(i), std::span(batch.x_csr.innerIndexPtr() + b, static_cast<size_t>(e - b)),
                std::span(batch.x_csr.valuePtr() + b, static_cast<size_t>(e - b)));
  }
}

void Mlr::compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) {
  Matrix p = probabilities(W, batch);
  for (int64_t i = 0; i < batch.size(); ++i) p(i, batch.labels[static_cast<size_t>(i)]) -= 1.0f;
  out.write_u_block(p);
  write_x_as_v(batch, out);
  out.commit();
}

Matrix Mlr::probabilities(const api::Weights& W, const io::Dataset& data, int64_t begin, int64_t end) {
  SFB_ENFORCE(W.cols() == data.dim, "W has {} columns, data {} features", W.cols(), data.dim);
  Matrix logits;
  if (data.sparse) {
    const io::SparseRows block = data.csr.middleRows(begin, end - begin);
    sparse_logits(block, W, logits);
  } else {
    dense_logits(data.dense.data() + begin * data.dim, end - begin, W, logits);
  }
  if (W.scale != 1.0f) logits *= W.scale;
  softmax_rows(logits);
  return logits;
}

double Mlr::cross_entropy(const api::Weights& W, const io::Dataset& data, int64_t limit) {
  const int64_t n = (limit <= 0 || limit > data.n) ? data.n : limit;
  if (n == 0) return 0.0;
  double loss = 0.0;
  const int64_t block = eval_block(W.rows());
  for (int64_t b = 0; b < n; b += block) {
    const int64_t e = std::min(n, b + block);
    const Matrix p = probabilities(W, data, b, e);
    for (int64_t i = b; i < e; ++i) loss -= std::log(std::max(p(i - b, data.labels[static_cast<size_t>(i)]), 1e-30f));
  }
  return loss / static_cast<double>(n);
}

double Mlr::objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const {
  return cross_entropy(W, data, limit);
}

double Mlr::accuracy(const api::Weights& W, const io::Dataset& data) const {
  if (data.n == 0) return -1.0;
  int64_t correct = 0;
  const int64_t block = eval_block(W.rows());
  for (int64_t b = 0; b < data.n; b += block) {
    const int64_t e = std::min(data.n, b + block);
    const Matrix p = probabilities(W, data, b, e);
    for (int64_t i = b; i < e; ++i) {
      Eigen::Index arg = 0;
      p.row(i - b).maxCoeff(&arg);
      correct += arg == data.labels[static_cast<size_t>(i)] ? 1 : 0;
    }
  }
  return static_cast<double>(correct) / static_cast<double>(data.n);
}

// Statistics slots: 0-1 the log-sum-exp (max, sum), 2 the target's logit, 3-4 the arg max.
std::vector<api::Reduce> MlrRows::statistics() const {
  return {api::Reduce::kLogSumExp, api::Reduce::kSum, api::Reduce::kMaxIndex};
}

api::MiniBatch MlrRows::eval_samples(const io::Dataset& data, int64_t limit, api::EvalSet) const {
  const int64_t n = (limit <= 0 || limit > data.n) ? data.n : limit;
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = i;
  api::MiniBatch b;
  api::gather(data, rows, b);
  return b;
}

void MlrRows::partial_statistics(const api::Weights& block, int64_t row0, const api::MiniBatch& samples,
                                 Matrix& outputs, float* stats) const {
  Mlr::logits(block, samples, outputs);
  const int64_t rows = block.rows();
  for (int64_t i = 0; i < samples.size(); ++i) {
    float* s = stats + i * 5;
    const int64_t y = samples.labels[static_cast<size_t>(i)] - row0;
    if (rows == 0) {
      s[0] = -std::numeric_limits<float>::infinity(), s[1] = 0, s[2] = 0, s[3] = s[0], s[4] = api::max_index_slot(0);
      continue;
    }
    Eigen::Index arg = 0;
    const float m = outputs.row(i).maxCoeff(&arg);
    s[0] = m;
    s[1] = (outputs.row(i).array() - m).exp().sum();
    s[2] = y >= 0 && y < rows ? outputs(i, y) : 0.0f;
    s[3] = m;
    s[4] = api::max_index_slot(static_cast<int32_t>(row0 + arg));
  }
}

void MlrRows::block_factors(int64_t row0, const api::MiniBatch& samples, const float* stats, Matrix& outputs) const {
  for (int64_t i = 0; i < samples.size(); ++i) {
    const float* s = stats + i * 5;
    const float lse = s[0] + std::log(s[1]);
    outputs.row(i) = (outputs.row(i).array() - lse).exp();
    const int64_t y = samples.labels[static_cast<size_t>(i)] - row0;
    if (y >= 0 && y < outputs.cols()) outputs(i, y) -= 1.0f;
  }
}

double MlrRows::sample_loss(const float* stats, int32_t) const {
  // -log p_y, floored as Mlr::cross_entropy floors p_y at 1e-30.
  const double lse = static_cast<double>(stats[0]) + std::log(static_cast<double>(stats[1]));
  return std::min(lse - static_cast<double>(stats[2]), -std::log(1e-30));
}

int MlrRows::sample_correct(const float* stats, int32_t label) const {
  return api::max_index_of(stats[4]) == label ? 1 : 0;
}

double MlrRows::block_regulariser(const api::Weights& block) const {
  if (lambda_ <= 0) return 0.0;
  const double sq = static_cast<double>(block.stored.squaredNorm()) * block.scale * block.scale;
  return 0.5 * lambda_ * sq;
}

}  // namespace sfb::models
