#include "sfb/models/l2mlr.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "sfb/core/error.h"
#include "sfb/models/mlr.h"

namespace sfb::models {

namespace {

// sigma^2 of Takac, Bijral, Richtarik and Srebro (2013, "Mini-batch primal and dual methods for
// SVMs") for the multiclass dual steps: a step of row i moves W by x_i d_i^T with d_i in the class
// space, so what simultaneous steps share is (x_i . x_j)(d_i . d_j), not x_i . x_j alone. With
// a_i = x_i (x) d_i and d_i = e_{y_i} - 1/J (the step's direction from alpha = 0 with p uniform),
// sigma^2 = lambda_max(A^T A) / (n max_i ||a_i||^2), in [1/n, 1]. The scalar bound (d_i
// ignored) counts every pair of rows sharing words as colliding even when their classes differ:
// on tf-idf rows (common words everywhere) it damped 50 classes' steps ~100x more than they need.
// Estimated on up to 4096 rows of this rank's partition (a random sample of the data) by 30 steps
// of power iteration on the D x J space from a fixed start.
double data_sigma2(const io::Dataset& d, int64_t J) {
  const int64_t n = std::min<int64_t>(d.n, 4096);
  if (n == 0 || d.dim == 0 || J < 2) return 1.0;
  const float inv_j = 1.0f / static_cast<float>(J);
  Matrix V(d.dim, J);
  for (int64_t r = 0; r < d.dim; ++r)
    for (int64_t c = 0; c < J; ++c) V(r, c) = std::cos(static_cast<float>(r * 7 + c * 3 + 1));
  V /= V.norm();
  Matrix XV(n, J), T(n, J);
  double lambda = 0, max_sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double sq =
        d.sparse ? static_cast<double>(d.csr.row(i).squaredNorm()) : static_cast<double>(d.dense.row(i).squaredNorm());
    max_sq = std::max(max_sq, sq * (1.0 - inv_j));  // ||d_i||^2 = 1 - 1/J
  }
  for (int it = 0; it < 30; ++it) {
    XV = d.sparse ? Matrix(d.csr.topRows(n) * V) : Matrix(d.dense.topRows(n) * V);
    for (int64_t i = 0; i < n; ++i) {  // T_i = (a_i . v) d_i
      const int32_t y = d.labels[static_cast<size_t>(i)];
      const float t = XV(i, y) - XV.row(i).mean();
      T.row(i).setConstant(-t * inv_j);
      T(i, y) += t;
    }
    Matrix W = d.sparse ? Matrix(d.csr.topRows(n).transpose() * T) : Matrix(d.dense.topRows(n).transpose() * T);
    lambda = static_cast<double>(W.norm());  // ||V|| = 1: the Rayleigh quotient's upper side
    if (!(lambda > 0)) return 1.0;
    V = W / static_cast<float>(lambda);
  }
  return max_sq > 0 ? std::clamp(lambda / (static_cast<double>(n) * max_sq), 0.0, 1.0) : 1.0;
}

}  // namespace

L2Mlr::L2Mlr(const api::ModelContext& ctx)
    : ShapedModel("l2mlr", ctx.train().classes, ctx.train().dim, ctx.train().sparse, model_layout(ctx, "l2mlr", true)),
      train_(ctx.train()),
      lambda_(ctx.param_double("lambda", 1e-4)) {
  const std::string solver = ctx.param_string("solver", "sgd");
  SFB_CHECK(solver == "sgd" || solver == "sdca", "model.solver must be \"sgd\" or \"sdca\", got \"{}\"", solver);
  sdca_ = solver == "sdca";
  lambda_n_ = lambda_ * static_cast<double>(ctx.train_total());
  const double sigma = ctx.param_double("sdca_sigma", 0.0);
  // b = P K dual steps at once are a dual ascent when damped by the ESO bound of a b-nice sampling,
  // 1 + (b - 1)(n sigma^2 - 1)/(n - 1): b for rows that all point one way, near 1 for sparse,
  // nearly orthogonal rows (text), where b would slow SDCA down tens of times.
  const double b = static_cast<double>(ctx.ranks()) * static_cast<double>(ctx.minibatch());
  sigma_ = sigma;
  if (sdca_ && sigma <= 0) {
    const double n = static_cast<double>(std::max<int64_t>(2, ctx.train_total()));
    const double s2 = data_sigma2(train_, rows());
    sigma_ = std::clamp(1.0 + (b - 1.0) * (n * s2 - 1.0) / (n - 1.0), 1.0, std::max(1.0, b));
    if (ctx.rank() == 0)
      spdlog::info(
          "l2mlr sdca: model.sdca_sigma = 0: {:.4g} for P K = {:g} simultaneous steps (the data's sigma^2 "
          "= {:.3g}: Takac et al. 2013's safe value)",
          sigma_, b, s2);
  }
  if (sigma_ <= 0) sigma_ = b;
  if (sdca_) {
    SFB_CHECK(lambda_ > 0, "model.solver = \"sdca\" needs model.lambda > 0, got {}", lambda_);
    alpha_ = Matrix::Zero(train_.n, rows());
  }
}

void L2Mlr::init(MatrixMap W, Rng& rng) {
  ShapedModel::init(W, rng);
  duals_known_.store(true);
}

void L2Mlr::compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) {
  Matrix p = Mlr::probabilities(W, batch);
  const int64_t k = batch.size();
  if (!sdca_) {
    for (int64_t i = 0; i < k; ++i) p(i, batch.labels[static_cast<size_t>(i)]) -= 1.0f;
    out.write_u_block(p);
  } else {
    // Dual step towards -grad phi_i = e_y - p_i; u = dalpha / (lambda n).
    std::lock_guard lock(alpha_mu_);
    for (int64_t i = 0; i < k; ++i) {
      const int64_t r = batch.rows[static_cast<size_t>(i)];
      const double sq = batch.sparse ? static_cast<double>(batch.x_csr.row(i).squaredNorm())
                                     : static_cast<double>(batch.x.row(i).squaredNorm());
      const auto s = static_cast<float>(lambda_n_ / (lambda_n_ + sigma_ * sq));
      auto a = alpha_.row(r);
      auto d = p.row(i);  // becomes dalpha
      d = -d;
      d(batch.labels[static_cast<size_t>(i)]) += 1.0f;
      d = s * (d - a);
      a += d;
      d /= static_cast<float>(lambda_n_);
    }
    out.write_u_block(p);
  }
  Mlr::write_x_as_v(batch, out);
  out.commit();
}

double L2Mlr::objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const {
  const double sq = static_cast<double>(W.stored.squaredNorm()) * W.scale * W.scale;  // either layout
  return Mlr::cross_entropy(W, data, limit) + 0.5 * lambda_ * sq;
}

double L2Mlr::accuracy(const api::Weights& W, const io::Dataset& data) const {
  return Mlr(rows(), cols(), sparse_v(), layout()).accuracy(W, data);
}

Matrix L2Mlr::alpha() const {
  std::lock_guard lock(alpha_mu_);
  return alpha_;
}

double L2Mlr::mean_dual_entropy(int64_t limit) const {
  std::lock_guard lock(alpha_mu_);
  const int64_t n = (limit <= 0 || limit > alpha_.rows()) ? alpha_.rows() : limit;
  if (n == 0) return 0.0;
  double h = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < rows(); ++j) {
      const double q = (j == train_.labels[static_cast<size_t>(i)] ? 1.0 : 0.0) - alpha_(i, j);
      if (q > 0) h -= q * std::log(q);
    }
  }
  return h / static_cast<double>(n);
}

double L2Mlr::duality_gap(const api::Weights& W, const io::Dataset& train, int64_t limit) const {
  SFB_ENFORCE(&train == &train_ || train.n <= train_.n, "duality gap on rows outside this rank's partition");
  const int64_t n = (limit <= 0 || limit > train.n) ? train.n : limit;
  if (n == 0) return 0.0;
  const Matrix p = Mlr::probabilities(W, train, 0, n);
  std::lock_guard lock(alpha_mu_);
  double gap = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < rows(); ++j) {
      const double q = (j == train.labels[static_cast<size_t>(i)] ? 1.0 : 0.0) - alpha_(i, j);
      if (q > 0) gap += q * (std::log(q) - std::log(std::max(static_cast<double>(p(i, j)), 1e-30)));
    }
  }
  return gap / static_cast<double>(n);
}

api::NamedValues L2Mlr::metrics(const api::Weights& W, const io::Dataset& train, int64_t limit,
                                const io::Dataset*) const {
  api::NamedValues v{{"w_norm", static_cast<double>(W.stored.norm()) * W.scale}};
  // The dual variables are this rank's partition's: the gap is on them, whatever rows the
  // objective is evaluated on.
  (void)train;
  if (sdca_ && duals_known_.load()) v.emplace_back("duality_gap", duality_gap(W, train_, limit));
  return v;
}

}  // namespace sfb::models
