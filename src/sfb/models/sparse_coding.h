#pragma once
// Sparse coding / dictionary learning (as in the SFB paper): a dictionary B whose columns are
// atoms, W = B (rows: data dimension, cols: model.atoms). For a sample x the code a solves the
// lasso  min_a 0.5 ||x - B a||^2 + gamma ||a||_1  with B fixed, by model.lasso_steps FISTA
// iterations (step 1 / ||B^T B||_2, computed by power iteration). The loss's gradient in B is
// (B a - x) a^T, so the SF pair is u = B a - x, v = a (sparse: only the code's non-zeros are sent).
// The prox projects every column of B onto the unit l2 ball (the constraint ||b_k|| <= 1 that
// makes the l1 penalty meaningful).
//
// Objective: mean of 0.5 ||x - B a||^2 + gamma ||a||_1 with a from the same lasso solve; metrics:
// relative reconstruction error sum ||x - Ba||^2 / sum ||x||^2 and code sparsity (fraction of zeros).
#include <mutex>
#include <optional>

#include "sfb/models/shaped_model.h"

namespace sfb::models {

class SparseCoding : public ShapedModel {
 public:
  explicit SparseCoding(const api::ModelContext& ctx);
  // Not row-sharded: W's rows are the data's dimensions, and a sample's code is a lasso over the
  // whole dictionary (each FISTA step needs B^T (B a - x), a sum over every row).
  std::string why_not_row_sharded() const override {
    return "a sample's code solves a lasso over the whole dictionary: every FISTA step needs B^T (B a - x), a sum "
           "over all of W's rows, so sharded by rows each of model.lasso_steps steps would be an all-reduce of "
           "the codes; this scheme does not implement that; use comm.scheme = \"sfb\"";
  }
  void init(MatrixMap W, Rng& rng) override;
  void compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) override;
  bool has_prox() const override { return true; }
  void prox(MatrixMap W, double step) override;
  double objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const override;
  double accuracy(const api::Weights&, const io::Dataset&) const override { return -1.0; }
  api::NamedValues metrics(const api::Weights& W, const io::Dataset& train, int64_t limit,
                           const io::Dataset* test) const override;

  // Codes of the rows of X (N x dim) for dictionary B (dim x atoms): N x atoms.
  Matrix encode(const Matrix& B, const Matrix& X) const;
  double gamma() const { return gamma_; }

 private:
  struct Eval {
    double objective = 0, rel_error = 0, sparsity = 0;
  };
  // The lasso solve over the evaluated rows is the expensive part of both objective() and
  // metrics(), which the monitor calls one after the other on the same snapshot: the last result
  // is kept, keyed by the content of B, the data set and the row limit.
  Eval evaluate(const Matrix& B, const io::Dataset& data, int64_t limit) const;
  Eval evaluate_uncached(const Matrix& B, const io::Dataset& data, int64_t limit) const;
  struct CachedEval {
    uint64_t b_checksum;
    const io::Dataset* data;
    int64_t limit;
    Eval eval;
  };
  mutable std::mutex cache_mu_;
  mutable std::optional<CachedEval> cache_;

  double gamma_;
  int64_t steps_;
};

}  // namespace sfb::models
