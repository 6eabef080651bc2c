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
// Estimated by 30 steps of power iteration on the D x J' space from a fixed start, over up to 4096
// rows of this rank's partition (a random sample of the data) whose classes are among the first
// J' = min(J, 2^22 / D) (the iteration's two D x J' matrices stay under 32 MiB whatever W's size;
// J' then stands for J in d_i).
double data_sigma2(const io::Dataset& d, int64_t J) {
  const int64_t classes =
      std::clamp<int64_t>((int64_t{1} << 22) / std::max<int64_t>(1, d.dim), 2, std::max<int64_t>(2, J));
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < d.n && rows.size() < 4096; ++i)
    if (d.labels[static_cast<size_t>(i)] < classes) rows.push_back(i);
  if (rows.size() < 2 || d.dim == 0 || J < 2) return 1.0;
  // Row r's non-zeros, (column, value), to `f`.
  const auto each = [&d](int64_t r, const auto& f) {
    if (d.sparse) {
      for (io::SparseRows::InnerIterator it(d.csr, r); it; ++it) f(static_cast<int64_t>(it.col()), it.value());
    } else {
      for (int64_t c = 0; c < d.dim; ++c)
        if (const float v = d.dense(r, c); v != 0.0f) f(c, v);
    }
  };
  const float inv_j = 1.0f / static_cast<float>(classes);
  double max_sq = 0;
  for (const int64_t r : rows) {
    double sq = 0;
    each(r, [&](int64_t, float v) { sq += static_cast<double>(v) * v; });
    max_sq = std::max(max_sq, sq * (1.0 - inv_j));  // ||d_i||^2 = 1 - 1/J'
  }
  Matrix V(d.dim, classes), W(d.dim, classes);
  for (int64_t r = 0; r < d.dim; ++r)
    for (int64_t c = 0; c < classes; ++c) V(r, c) = std::cos(static_cast<float>(r * 7 + c * 3 + 1));
  V /= V.norm();
  Eigen::RowVectorXf xv(classes);
  double lambda = 0;
  for (int it = 0; it < 30; ++it) {
    W.setZero();
    for (const int64_t r : rows) {  // W += a_r (a_r . V) with a_r = x_r (x) d_r
      xv.setZero();
      each(r, [&](int64_t c, float v) { xv += v * V.row(c); });
      const int32_t y = d.labels[static_cast<size_t>(r)];
      const float t = xv(y) - xv.mean();
      xv.setConstant(-t * inv_j);
      xv(y) += t;
      each(r, [&](int64_t c, float v) { W.row(c) += v * xv; });
    }
    lambda = static_cast<double>(W.norm());  // ||V|| = 1: the Rayleigh quotient's upper side
    if (!(lambda > 0)) return 1.0;
    V = W / static_cast<float>(lambda);
  }
  return max_sq > 0 ? std::clamp(lambda / (static_cast<double>(rows.size()) * max_sq), 0.0, 1.0) : 1.0;
}

}  // namespace

L2Mlr::L2Mlr(const api::ModelContext& ctx)
    : ShapedModel("l2mlr", ctx.train().classes, ctx.train().dim, ctx.train().sparse, model_layout(ctx, "l2mlr", true)),
      train_(ctx.train()),
      lambda_(ctx.param_double("lambda", 1e-4)),
      rows_(lambda_) {
  const std::string solver = ctx.param_string("solver", "sgd");
  SFB_CHECK(solver == "sgd" || solver == "sdca", "model.solver must be \"sgd\" or \"sdca\", got \"{}\"", solver);
  sdca_ = solver == "sdca";
  // model.C: liblinear's C, lambda = 1 / (C n).
  if (const double C = ctx.param_double("C", 0.0); C > 0) lambda_ = 1.0 / (C * static_cast<double>(ctx.train_total()));
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
