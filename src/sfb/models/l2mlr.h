#pragma once
// L2-regularised multiclass logistic regression: mean cross-entropy + (lambda/2) ||W||^2, with
// two solvers (model.solver):
//
//  * "sgd": proximal SGD. The SF pairs are MLR's (u = p - e_y, v = x); the prox of the L2 term is
//    the shrinkage W <- W / (1 + eta lambda), which the runtime applies in O(1) through a scale
//    factor (prox_scale, sfb/api/weights.h) instead of touching all J * D entries.
//  * "sdca": stochastic dual coordinate ascent (Shalev-Shwartz & Zhang 2013). Sample i has a dual
//    vector alpha_i = e_{y_i} - q_i with q_i on the simplex, and W = (1/(lambda n)) sum_i alpha_i x_i^T.
//    A dual step for sample i moves alpha_i towards -grad = e_y - p_i by the fraction
//    s_i = lambda n / (lambda n + sigma ||x_i||^2) (softmax cross-entropy is 1-smooth; sigma = P * K
//    keeps P * K simultaneous steps a dual ascent), and is broadcast as the SF pair
//    (u = dalpha_i / (lambda n), v = x_i), applied as written (UpdateRule::kAsWritten).
//    Convergence measure: the duality gap, which for W = w(alpha) is the mean over samples of
//    KL(q_i || softmax(W x_i)) >= 0; the metrics report it over rank 0's evaluation rows, and only
//    when W = w(alpha) holds: a run that started from init() (W = 0, alpha = 0). A resumed or
//    warm-started run and `sfbd --evaluate` have a W whose duals nobody kept (checkpoints and model
//    files hold W only): their metrics have no "duality_gap" rather than a number that means nothing.
//
// Threads: compute_sf() (compute thread) writes alpha under alpha_mu_; metrics() (monitor) reads
// it under the same lock.
#include <atomic>
#include <mutex>

#include "sfb/models/mlr.h"
#include "sfb/models/shaped_model.h"

namespace sfb::models {

class L2Mlr : public ShapedModel {
 public:
  explicit L2Mlr(const api::ModelContext& ctx);
  api::UpdateRule update_rule() const override {
    return sdca_ ? api::UpdateRule::kAsWritten : api::UpdateRule::kGradientStep;
  }
  // W arrives zeroed, the dual of alpha = 0: from here on the gap is known.
  void init(MatrixMap W, Rng& rng) override;
  void compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) override;
  double prox_scale(double step) const override { return sdca_ ? 1.0 : 1.0 / (1.0 + step * lambda_); }
  // Primal objective: mean cross-entropy + (lambda/2) ||W||^2.
  double objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const override;
  double accuracy(const api::Weights& W, const io::Dataset& data) const override;
  api::NamedValues metrics(const api::Weights& W, const io::Dataset& train, int64_t limit,
                           const io::Dataset* test) const override;

  // Proximal SGD shards by rows (MLR's statistics, the shrinkage by prox_scale); SDCA does not.
  api::RowSharded* row_sharded() override { return sdca_ ? nullptr : &rows_; }
  std::string why_not_row_sharded() const override {
    return "model.solver = \"sdca\" keeps a dual vector per training row and class: sharded by class rows, "
           "every rank would keep the duals of every training row (N x J / P floats), which this scheme does not "
           "implement; use model.solver = \"sgd\"";
  }

  bool sdca() const { return sdca_; }
  double sdca_sigma() const { return sigma_; }  // the damping in use (model.sdca_sigma, or the data's)
  // SDCA: the dual objective's per-sample part, (1/n_rows) sum over the first `limit` rows of
  // this rank's data of H(q_i) (entropy), and the gap estimate mean KL(q_i || p_i(W)).
  double mean_dual_entropy(int64_t limit) const;
  double duality_gap(const api::Weights& W, const io::Dataset& train, int64_t limit) const;
  // Copy of the dual variables (rows of this rank's partition x J).
  Matrix alpha() const;

 private:
  const io::Dataset& train_;
  double lambda_;
  bool sdca_;
  double lambda_n_;  // lambda * n over all ranks
  double sigma_;
  mutable std::mutex alpha_mu_;
  Matrix alpha_;                          // SDCA: n_local x J
  std::atomic<bool> duals_known_{false};  // W = w(alpha): training started from init()
  MlrRows rows_;
};

}  // namespace sfb::models
