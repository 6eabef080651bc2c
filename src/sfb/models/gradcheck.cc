#include "sfb/models/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "sfb/api/batch_sf_writer.h"
#include "sfb/api/minibatch.h"
#include "sfb/core/error.h"
#include "sfb/core/rng.h"

namespace sfb::models {
namespace {

// The batch's rows as a dataset of their own, for objective().
io::Dataset dataset_of(const io::Dataset& data, const api::MiniBatch& batch) {
  io::Dataset d;
  d.name = data.name + " (the checked rows)";
  d.n = batch.size();
  d.dim = data.dim;
  d.classes = data.classes;
  d.sparse = data.sparse;
  if (data.sparse)
    d.csr = batch.x_csr;
  else
    d.dense = batch.x;
  d.labels = batch.labels;
  return d;
}

// (1/K) sum_i u_i v_i^T of a committed batch, in `layout` (D x J feature-major).
Matrix sf_gradient(const SfBatch& b, Layout layout) {
  Matrix G = Matrix::Zero(b.J, b.D);
  if (!b.sparse_v) {
    G.noalias() = b.u.transpose() * b.v;
  } else {
    for (int32_t i = 0; i < b.count; ++i)
      for (int64_t k = b.v_row_ptr[static_cast<size_t>(i)]; k < b.v_row_ptr[static_cast<size_t>(i) + 1]; ++k)
        G.col(b.v_index[static_cast<size_t>(k)]) += b.u.row(i).transpose() * b.v_value[static_cast<size_t>(k)];
  }
  return from_row_major(G / static_cast<float>(std::max(1, b.count)), layout);
}

// The regulariser's gradient as the proximal steps see it: (W - prox_t(W)) / t for a small t.
Matrix regulariser_gradient(api::Model& model, const Matrix& W) {
  constexpr double t = 1e-4;
  const double c = model.prox_scale(t);
  Matrix R = W * static_cast<float>((1.0 - c) / t);
  if (model.has_prox()) {
    Matrix P = W * static_cast<float>(c);
    model.prox(view(P), t);
    R += (W * static_cast<float>(c) - P) / static_cast<float>(t);
  }
  return R;
}

// The model's own init() plus a random perturbation, made feasible by its proximal step; stored in
// the model's layout, as the runtime keeps it.
Matrix starting_point(api::Model& model, Rng& rng) {
  const Layout l = model.layout();
  Matrix W = Matrix::Zero(stored_rows(l, model.rows(), model.cols()), stored_cols(l, model.rows(), model.cols()));
  model.init(view(W), rng);
  const double rms = W.size() ? std::sqrt(static_cast<double>(W.squaredNorm()) / static_cast<double>(W.size())) : 0;
  std::normal_distribution<float> g(0.0f, static_cast<float>(rms > 0 ? 0.1 * rms : 0.01));
  for (Eigen::Index i = 0; i < W.size(); ++i) W.data()[i] += g(rng);
  if (model.has_prox()) model.prox(view(W), 0.0);
  return W;
}

api::MiniBatch draw_batch(const io::Dataset& data, int64_t samples, Rng& rng) {
  std::vector<int64_t> rows(static_cast<size_t>(data.n));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(static_cast<size_t>(std::min(samples, data.n)));
  std::sort(rows.begin(), rows.end());
  api::MiniBatch batch;
  api::gather(data, rows, batch);
  return batch;
}

// Along the unit direction E: the central difference of `loss` at W for each of `steps` (times
// w_scale) against the SFs' directional derivative <G, E>; the step that agrees best. `at` gives the
// loss and gradient norm at W that scale the error.
template <typename Loss>
GradcheckDirection check_direction(const Loss& loss, const Matrix& W, const Matrix& G, const Matrix& E,
                                   const std::vector<double>& steps, double w_scale, const GradcheckResult& at) {
  GradcheckDirection best;
  best.error = std::numeric_limits<double>::infinity();
  for (const double step : steps) {
    const double h = step * w_scale;
    GradcheckDirection d;
    d.step = h;
    d.finite_difference = (loss(W + static_cast<float>(h) * E) - loss(W - static_cast<float>(h) * E)) / (2 * h);
    d.from_sf = static_cast<double>(G.cwiseProduct(E).sum());
    const double noise = 1e-6 * std::max(1.0, std::abs(at.loss)) / h;
    const double scale = std::max({std::abs(d.finite_difference), std::abs(d.from_sf), 1e-3 * at.gradient_norm, noise});
    d.error = scale > 0 ? std::abs(d.finite_difference - d.from_sf) / scale : 0.0;
    if (std::isfinite(d.error) && d.error < best.error) best = d;
  }
  return best;
}

}  // namespace

GradcheckResult gradcheck(api::Model& model, const io::Dataset& data, const GradcheckOptions& opt) {
  SFB_CHECK(model.update_rule() == api::UpdateRule::kGradientStep,
            "model \"{}\" writes its update itself (UpdateRule::kAsWritten, e.g. a dual coordinate step): its SFs are "
            "not a gradient, so there is nothing to check against finite differences",
            model.name());
  SFB_CHECK(data.n > 0 && opt.samples > 0 && opt.directions > 0, "gradcheck needs data rows, samples and directions");
  Rng rng = make_rng(opt.seed, 0x6C);
  const Matrix W = starting_point(model, rng);
  const api::MiniBatch batch = draw_batch(data, opt.samples, rng);
  const io::Dataset rows = dataset_of(data, batch);
  const auto sfs_at = [&](const Matrix& stored, float scale) {
    SfBatchPtr sfs;
    api::BatchSfWriter writer(static_cast<int32_t>(model.rows()), static_cast<int32_t>(model.cols()),
                              [&](SfBatchPtr b) { sfs = std::move(b); });
    writer.begin(0, batch.clock, static_cast<int32_t>(batch.size()), 1.0f, model.sparse_v());
    model.compute_sf(api::Weights{stored, scale, model.layout()}, batch, writer);
    SFB_CHECK(sfs, "model \"{}\": compute_sf() returned without commit()", model.name());
    return sfs;
  };
  const SfBatchPtr sfs = sfs_at(W, 1.0f);
  const auto loss = [&](const Matrix& at) {
    const api::Weights w{at, 1.0f, model.layout()};
    const double l = model.batch_loss(w, batch);
    return std::isnan(l) ? model.objective(w, rows, 0) : l;
  };
  const Matrix R = regulariser_gradient(model, W);
  const Matrix G = sf_gradient(*sfs, model.layout()) + R;
  GradcheckResult res;
  res.samples = batch.size();
  res.loss = loss(W);
  res.gradient_norm = G.norm();
  res.regulariser_norm = R.norm();
  const double w_scale = std::max(1.0, static_cast<double>(W.norm()));
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int64_t k = 0; k < opt.directions; ++k) {
    Matrix E(W.rows(), W.cols());
    for (Eigen::Index i = 0; i < E.size(); ++i) E.data()[i] = g(rng);
    E /= E.norm();
    const GradcheckDirection best = check_direction(loss, W, G, E, opt.steps, w_scale, res);
    res.worst_error = std::max(res.worst_error, best.error);
    res.directions.push_back(best);
  }
  res.passed = res.worst_error <= opt.tolerance;
  if (model.prox_scale(1e-4) != 1.0) {
    // The same W as 0.5 * (2 W): exact in floats, so only a model that reads `stored` alone differs.
    const Matrix twice = W * 2.0f;
    const Matrix G2 = sf_gradient(*sfs_at(twice, 0.5f), model.layout()) + R;
    res.scale_error = static_cast<double>((G2 - G).norm()) / std::max(static_cast<double>(G.norm()), 1e-30);
    res.passed = res.passed && res.scale_error <= opt.tolerance;
  }
  return res;
}

}  // namespace sfb::models
