#include "sfb/models/sparse_coding.h"

#include <algorithm>
#include <cmath>

#include "sfb/core/error.h"
#include "sfb/core/gemm.h"
#include "sfb/core/hash.h"

namespace sfb::models {
namespace {

// Rows [begin, end) of data as a dense block.
Matrix dense_rows(const io::Dataset& data, int64_t begin, int64_t end) {
  if (!data.sparse) return data.dense.middleRows(begin, end - begin);
  return Matrix(data.csr.middleRows(begin, end - begin));
}

// Largest eigenvalue of the symmetric PSD matrix G by power iteration (an upper estimate: the
// Rayleigh quotient converges from below, so the result is scaled by 1.01).
float top_eigenvalue(const Matrix& G) {
  Vector v = Vector::Ones(G.rows()) / std::sqrt(static_cast<float>(G.rows()));
  float lambda = 0;
  for (int it = 0; it < 30; ++it) {
    Vector w = G * v;
    const float n = w.norm();
    if (n == 0) return 0;
    lambda = v.dot(w);
    v = w / n;
  }
  return 1.01f * lambda;
}

}  // namespace

SparseCoding::SparseCoding(const api::ModelContext& ctx)
    : ShapedModel("sparse_coding", ctx.train().dim, ctx.param_int("atoms", 64), true,
                  model_layout(ctx, "sparse_coding", false)),
      gamma_(ctx.param_double("gamma", 0.1)),
      steps_(ctx.param_int("lasso_steps", 30)) {
  SFB_CHECK(cols() >= 1, "model.atoms must be >= 1, got {}", cols());
  SFB_CHECK(steps_ >= 1, "model.lasso_steps must be >= 1, got {}", steps_);
}

void SparseCoding::init(MatrixMap W, Rng& rng) {
  // Random unit-norm atoms.
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (Eigen::Index i = 0; i < W.size(); ++i) W.data()[i] = g(rng);
  for (Eigen::Index c = 0; c < W.cols(); ++c) W.col(c).normalize();
}

Matrix SparseCoding::encode(const Matrix& B, const Matrix& X) const {
  // FISTA (Beck & Teboulle 2009) on 0.5 ||x - B a||^2 + gamma ||a||_1 for all rows at once:
  // the gradient of the smooth part is A G - X B with G = B^T B.
  // G = B^T B as a symmetric rank update: half the flops of the plain product.
  Matrix G;
  gemm(Op::kTranspose, B, Op::kNone, B, G);  // atoms x atoms
  Matrix C;
  gemm(Op::kNone, X, Op::kNone, B, C);
  Matrix YG;
  const float L = std::max(top_eigenvalue(G), 1e-12f);
  const float thresh = static_cast<float>(gamma_) / L;
  Matrix A = Matrix::Zero(X.rows(), cols());
  Matrix Y = A, A_next;
  float t = 1.0f;
  for (int64_t it = 0; it < steps_; ++it) {
    gemm(Op::kNone, Y, Op::kNone, G, YG);
    A_next.noalias() = Y - (YG - C) / L;
    A_next =
        A_next.unaryExpr([thresh](float v) { return v > thresh ? v - thresh : (v < -thresh ? v + thresh : 0.0f); });
    const float t_next = 0.5f * (1.0f + std::sqrt(1.0f + 4.0f * t * t));
    Y = A_next + ((t - 1.0f) / t_next) * (A_next - A);
    A.swap(A_next);
    t = t_next;
  }
  return A;
}

void SparseCoding::compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) {
  SFB_ENFORCE(W.scale == 1.0f, "sparse coding has no scaling prox, scale {}", W.scale);
  const Matrix X = batch.sparse ? Matrix(batch.x_csr) : batch.x;
  const Matrix A = encode(row_major_only(W, name()), X);
  Matrix R;
  gemm(Op::kNone, A, Op::kTranspose, W.stored, R);  // K x dim: rows are (B a_i)^T
  R -= X;
  out.write_u_block(R);
  api::write_v_nonzeros(out, A);  // the codes are sparse
  out.commit();
}

void SparseCoding::prox(MatrixMap W, double) {
  // Projection onto {B : ||b_k||_2 <= 1 for every column k}.
  const Eigen::RowVectorXf norms = W.colwise().norm();
  for (Eigen::Index c = 0; c < W.cols(); ++c)
    if (norms(c) > 1.0f) W.col(c) /= norms(c);
}

SparseCoding::Eval SparseCoding::evaluate(const Matrix& B, const io::Dataset& data, int64_t limit) const {
  const uint64_t sum = matrix_checksum(B);
  std::lock_guard lock(cache_mu_);
  if (!cache_ || cache_->b_checksum != sum || cache_->data != &data || cache_->limit != limit)
    cache_ = CachedEval{sum, &data, limit, evaluate_uncached(B, data, limit)};
  return cache_->eval;
}

SparseCoding::Eval SparseCoding::evaluate_uncached(const Matrix& B, const io::Dataset& data, int64_t limit) const {
  const int64_t n = (limit <= 0 || limit > data.n) ? data.n : limit;
  Eval e;
  if (n == 0) return e;
  double err = 0, norm = 0, l1 = 0, zeros = 0;
  constexpr int64_t kBlock = 1024;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = std::min(n, b + kBlock);
    const Matrix X = dense_rows(data, b, end);
    const Matrix A = encode(B, X);
    Matrix R;
    gemm(Op::kNone, A, Op::kTranspose, B, R);
    R -= X;
    err += static_cast<double>(R.squaredNorm());
    norm += static_cast<double>(X.squaredNorm());
    l1 += static_cast<double>(A.cwiseAbs().sum());
    zeros += static_cast<double>((A.array() == 0.0f).count());
  }
  e.objective = (0.5 * err + gamma_ * l1) / static_cast<double>(n);
  e.rel_error = norm > 0 ? err / norm : 0.0;
  e.sparsity = zeros / (static_cast<double>(n) * static_cast<double>(cols()));
  return e;
}

double SparseCoding::objective(const api::Weights& weights, const io::Dataset& data, int64_t limit) const {
  const Matrix& W = row_major_only(weights, name());
  return evaluate(W, data, limit).objective;
}

api::NamedValues SparseCoding::metrics(const api::Weights& weights, const io::Dataset& train, int64_t limit,
                                       const io::Dataset*) const {
  const Matrix& W = row_major_only(weights, name());
  const Eval e = evaluate(W, train, limit);
  double max_norm = 0;
  for (Eigen::Index c = 0; c < W.cols(); ++c) max_norm = std::max(max_norm, static_cast<double>(W.col(c).norm()));
  return {{"reconstruction_error", e.rel_error}, {"code_sparsity", e.sparsity}, {"max_atom_norm", max_norm}};
}

}  // namespace sfb::models
