#pragma once
// The optional row-sharded interface of a model (comm.scheme = "sharded", docs/plugins.md): W's
// rows are cut into P contiguous blocks, rank r owns rows [row0, row0 + rows) and nobody holds W.
// A model can train so when, for a sample s with row v_s (its input row, or what it derives from
// it), every row j of W needs only
//   * the sample's own outputs on the block, o_sj = W_j . v_s (computed where the row lives), and
//   * a few per-sample statistics that are reductions over ALL rows (sums, log-sum-exps),
// and its gradient is rank one per sample, u_s v_s^T, with u_sj a function of o_sj and those
// statistics. MLR: o = logits, statistics (max, sum of exp) and the target logit, u = p - e_y.
// DML: o = L d, statistic ||L d||^2, u = +-2 L d. Each clock the runtime
//   1. asks every rank for its minibatch's samples (shard_samples) and all-gathers them;
//   2. on every rank: partial_statistics of all P K samples from its block (and their outputs);
//   3. one fused all-reduce of the statistics (each slot by its Reduce, ranks in order);
//   4. block_factors turns the outputs into u on the block, and the runtime applies
//      block += -(eta_c / K) u^T v, sender by sender in rank order, then the model's prox_scale():
// exactly what SFB's full broadcast under BSP applies, computed another way (the W-equality test).
// The objective and accuracy come from the same statistics on eval_samples, reduced the same way.
//
// Threads: every method is called by the one thread that runs the sharded engine on that rank.
#include <bit>
#include <cstdint>
#include <vector>

#include "sfb/api/minibatch.h"
#include "sfb/api/weights.h"
#include "sfb/core/rng.h"
#include "sfb/io/dataset.h"

namespace sfb::api {

// How one statistic is reduced across the blocks.
enum class Reduce : uint8_t {
  kSum,        // one float: the sum of the blocks' values
  kLogSumExp,  // two floats (m, s), the block's max and sum of exp(x - m): merged as a log-sum-exp
  kMaxIndex,   // two floats (value, index): the larger value wins, a tie the smaller index; the index
               // is an int32 row number whose bits are stored in the float (max_index_slot), never
               // computed with
};

// The second float of a kMaxIndex slot for row `index`, and back.
inline float max_index_slot(int32_t index) { return std::bit_cast<float>(index); }
inline int32_t max_index_of(float slot) { return std::bit_cast<int32_t>(slot); }

// Which evaluation eval_samples() prepares: the objective's (the objective's sample of the training
// rows) or the accuracy's (the test set).
enum class EvalSet : uint8_t { kObjective, kAccuracy };

class RowSharded {
 public:
  virtual ~RowSharded() = default;
  // The block of W that init() makes from the same rng: rows [row0, row0 + rows) of W, in the
  // model's layout (rows x D, or D x rows feature-major), zeroed on entry. The default leaves it
  // zero, for models whose init() does.
  virtual void init_block(MatrixMap block, int64_t row0, Rng& rng) {
    (void)block;
    (void)row0;
    (void)rng;
  }
  // The statistics of one sample, slot by slot (kLogSumExp and kMaxIndex take two floats). Fixed.
  virtual std::vector<Reduce> statistics() const = 0;
  // This rank's samples of `batch` as every rank will see them: rows v (batch.x or batch.x_csr, D
  // columns) and one int32 per sample in labels (MLR: the class; DML: 1 similar, 0 dissimilar).
  // Called once per clock on the rank that sampled `batch`.
  virtual MiniBatch shard_samples(const MiniBatch& batch) = 0;
  // The evaluation samples of the first `limit` rows of `data` (all when <= 0) for `set`, the same
  // on every rank given the same data (the objective's sample, the test set).
  virtual MiniBatch eval_samples(const io::Dataset& data, int64_t limit, EvalSet set) const = 0;
  // From the block (rows [row0, row0 + block.rows()) of W, in the model's layout, scale applied
  // by the caller's reading): `outputs` (n x block rows, the samples' outputs on the block) and
  // `stats` (n x the statistics' width, this block's share of each).
  virtual void partial_statistics(const Weights& block, int64_t row0, const MiniBatch& samples, Matrix& outputs,
                                  float* stats) const = 0;
  // In place: `outputs` of partial_statistics becomes u on the block (n x block rows), given the
  // reduced statistics (n x width).
  virtual void block_factors(int64_t row0, const MiniBatch& samples, const float* stats, Matrix& outputs) const = 0;
  // One sample's loss from its reduced statistics and label.
  virtual double sample_loss(const float* stats, int32_t label) const = 0;
  // 1 when the sample is predicted right, 0 when not, -1 when the model has no accuracy.
  virtual int sample_correct(const float* stats, int32_t label) const = 0;
  // The regulariser's share of the block in the objective (summed over the blocks); 0 by default.
  virtual double block_regulariser(const Weights& block) const {
    (void)block;
    return 0.0;
  }
};

// Width in floats of `stats`.
inline int64_t statistics_width(const std::vector<Reduce>& stats) {
  int64_t w = 0;
  for (Reduce r : stats) w += r == Reduce::kSum ? 1 : 2;
  return w;
}

}  // namespace sfb::api
