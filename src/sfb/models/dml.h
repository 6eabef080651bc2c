#pragma once
// Distance metric learning (Xing et al. 2002, as in the SFB paper): W = L (J x D) defines the
// distance ||L(x - y)||^2. Similar pairs (same class) are pulled together, dissimilar pairs are
// pushed until their distance reaches the margin m:
//   loss(x, y) = ||L d||^2                     (similar),   d = x - y
//              = max(0, m - ||L d||^2)         (dissimilar)
// The gradient is +-2 (L d) d^T, so the SF pair of one pair is u = +-2 L d (0 when the hinge is
// inactive) and v = d. Each minibatch sample x_i is paired with a partner from this rank's
// partition: of the same class with probability 1/2, else of another class.
//
// Evaluation uses model.eval_pairs fixed pairs (half similar) drawn from the evaluated data:
// objective = mean loss, accuracy = fraction of pairs classified right by distance < m / 2,
// metrics: pair_auc (AUC of -distance for "similar") on the test pairs.
#include <vector>

#include "sfb/models/shaped_model.h"

namespace sfb::models {

class Dml;

// DML's row-sharded side (api/row_sharded.h): a block of L's rows. A sample is a pair's difference
// d = x_a - x_b (dense), its label 1 for similar; the one statistic is ||L d||^2 (a sum over the
// rows), u on the block is +-2 L d (0 outside the margin).
class DmlRows final : public api::RowSharded {
 public:
  explicit DmlRows(Dml& m) : m_(m) {}
  void init_block(MatrixMap block, int64_t row0, Rng& rng) override;
  std::vector<api::Reduce> statistics() const override { return {api::Reduce::kSum}; }
  api::MiniBatch shard_samples(const api::MiniBatch& batch) override;
  api::MiniBatch eval_samples(const io::Dataset& data, int64_t limit, api::EvalSet set) const override;
  void partial_statistics(const api::Weights& block, int64_t row0, const api::MiniBatch& samples, Matrix& outputs,
                          float* stats) const override;
  void block_factors(int64_t row0, const api::MiniBatch& samples, const float* stats, Matrix& outputs) const override;
  double sample_loss(const float* stats, int32_t label) const override;
  int sample_correct(const float* stats, int32_t label) const override;

 private:
  Dml& m_;
};

class Dml : public ShapedModel {
 public:
  explicit Dml(const api::ModelContext& ctx);
  void init(MatrixMap W, Rng& rng) override;
  double batch_loss(const api::Weights& W, const api::MiniBatch& batch) const override;
  void compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) override;
  double objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const override;
  double accuracy(const api::Weights& W, const io::Dataset& data) const override;
  api::NamedValues metrics(const api::Weights& W, const io::Dataset& train, int64_t limit,
                           const io::Dataset* test) const override;

  struct Pair {
    int64_t a, b;
    bool similar;
  };
  // `count` pairs of rows [0, n) of `data`, half similar, drawn from `seed`.
  static std::vector<Pair> draw_pairs(const io::Dataset& data, int64_t n, int64_t count, uint64_t seed);
  // The pairs compute_sf() uses for `batch` (sample i with its partner), a function of
  // (seed, rank, clock) only.
  std::vector<Pair> batch_pairs(const api::MiniBatch& batch) const;
  // Mean loss of `pairs` of rows of `data` under L.
  double pair_loss(const Matrix& L, const io::Dataset& data, const std::vector<Pair>& pairs) const;
  // Squared distances ||L(x_a - x_b)||^2 of the pairs.
  static std::vector<double> distances(const Matrix& L, const io::Dataset& data, const std::vector<Pair>& pairs);
  double margin() const { return margin_; }
  api::RowSharded* row_sharded() override { return &rows_sharded_; }

 private:
  friend class DmlRows;
  const io::Dataset& train_;
  double margin_;
  int64_t eval_pairs_;
  uint64_t seed_;
  int rank_;
  std::vector<std::vector<int64_t>> by_class_;  // rows of the partition per class
  DmlRows rows_sharded_{*this};
};

}  // namespace sfb::models
