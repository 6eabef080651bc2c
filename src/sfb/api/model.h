#pragma once
// The model interface: the public plugin API (docs/plugins.md). A model declares the shape of its
// parameter matrix W (J x D) and the layout the runtime keeps it in (row-major or feature-major,
// sfb/core/tensor.h), initialises W, computes sufficient factors for a minibatch from the
// current W through an SfWriter (write_u / write_v / commit), may supply a proximal step applied by
// the update thread, and evaluates its objective. Staleness and the broadcast topology are
// configuration, never model code. Built-in models and plugins implement the same class and are
// created by the same factory signature (sfb/api/plugin.h).
//
// Threads: compute_sf() runs on the SF-compute thread with W read-locked (the update thread does
// not write W meanwhile); prox() and prox_scale() run on the update thread with W write-locked;
// objective(), accuracy() and metrics() run on rank 0's monitor thread on a snapshot of W,
// concurrently with compute_sf(): state that compute_sf() changes and those read needs a lock.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sfb/api/errors.h"
#include "sfb/api/minibatch.h"
#include "sfb/api/model_context.h"
#include "sfb/api/row_sharded.h"
#include "sfb/api/sf_writer.h"
#include "sfb/api/weights.h"
#include "sfb/core/rng.h"
#include "sfb/io/dataset.h"

namespace sfb::api {

// How the runtime turns a batch's u into an update of W.
enum class UpdateRule {
  kGradientStep,  // u is a gradient factor: the runtime multiplies it by -eta_c / K (SGD)
  kAsWritten,     // u is the update itself (e.g. a dual coordinate step): no scaling
};

// Named values a model reports at each evaluation besides objective and accuracy; they go into
// the metrics JSON lines ("duality_gap", "pair_auc", "sparsity", ...).
using NamedValues = std::vector<std::pair<std::string, double>>;

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  // Parameter shape J x D (fixed for the model's life).
  virtual int64_t rows() const = 0;
  virtual int64_t cols() const = 0;
  // How the runtime stores W (fixed for the model's life). Row-major (J x D) suits dense v: the
  // update is one GEMM in either layout. Feature-major (stored D x J) suits sparse v: each non-zero
  // v_d updates the J contiguous floats of feature d, and a sparse row's logits read whole stored
  // rows. Every MatrixMap handed to init() and prox() is the stored matrix in this layout
  // (D x J for feature-major); Weights (compute_sf, objective, ...) says the layout it carries.
  virtual Layout layout() const { return Layout::kRowMajor; }
  // W arrives zeroed in the model's layout (J x D, or D x J feature-major); every rank calls this
  // with the same rng state. W is a view (it cannot be resized: its memory belongs to the runtime).
  virtual void init(MatrixMap W, Rng& rng) {
    (void)W;
    (void)rng;
  }
  virtual UpdateRule update_rule() const { return UpdateRule::kGradientStep; }
  // "Sparse" means one of two things, each decided once:
  //  * the input rows: io::Dataset::sparse (and its copy MiniBatch::sparse) says the data is CSR
  //    (libsvm, or synthetic with density < 1): read batch.x_csr / data.csr, not batch.x / data.dense.
  //    A model that can read them returns true from reads_sparse_rows(); sfbd refuses to run one
  //    that does not on sparse data (exit code 2) instead of handing it an empty batch.x.
  //  * the v it writes: sparse_v() true means write_v(i, index, value), false write_v(i, v) or
  //    write_v_block(). Independent of the input (sparse coding writes sparse codes of dense rows).
  virtual bool reads_sparse_rows() const { return false; }
  virtual bool sparse_v() const { return false; }
  // Writes out.count() SF pairs for `batch` (one per sample) and calls out.commit().
  virtual void compute_sf(const Weights& W, const MiniBatch& batch, SfWriter& out) = 0;
  // A general proximal step W <- prox_{step * r}(W), called after each applied batch (on a view of
  // the stored matrix, in the model's layout).
  virtual bool has_prox() const { return false; }
  virtual void prox(MatrixMap W, double step) {
    (void)W;
    (void)step;
  }
  // A proximal step that is a pure shrinkage W <- c * W (L2): return c for this step, or 1 for
  // none. `step` is the step size of the batch just applied (eta_c of its clock: optimizer.lr with
  // its decay); called once per applied batch (P times per clock under full broadcast: once for each
  // sender's batch), before prox(). The runtime keeps the product of the factors as Weights::scale
  // instead of rescaling W (O(1), sfb/api/weights.h): compute_sf() must use W.scale (W(j, d),
  // W.matrix()), while objective(), accuracy() and metrics() get W with scale 1.
  virtual double prox_scale(double step) const {
    (void)step;
    return 1.0;
  }
  // objective(), batch_loss(), accuracy() and metrics() get W with scale 1 in the runtime's layout
  // (the model's own), or row-major when a caller has a plain J x D matrix (tests, sfbd --evaluate
  // on a model declared row-major): read W through Weights, or refuse a layout you do not handle.
  //
  // Mean loss (the objective the run reports and stops on) over the first `limit` rows of `data`
  // (all when limit <= 0 or > n).
  virtual double objective(const Weights& W, const io::Dataset& data, int64_t limit) const = 0;
  // For sfb-gradcheck: the loss whose gradient compute_sf() writes for `batch`, on plain W, with the
  // same regulariser terms as objective(). Return NaN (the default) when that is objective() on the
  // batch's rows, which the checker then evaluates; override it when the SFs come from something
  // else the batch determines (DML's sampled pairs).
  virtual double batch_loss(const Weights& W, const MiniBatch& batch) const {
    (void)W;
    (void)batch;
    return std::numeric_limits<double>::quiet_NaN();
  }
  // comm.scheme = "sharded" (sfb/api/row_sharded.h): the model's row-sharded side, or null when it
  // has none; then why_not_row_sharded() says why, for the error that refuses the job.
  virtual RowSharded* row_sharded() { return nullptr; }
  virtual std::string why_not_row_sharded() const { return "it does not implement sfb::api::RowSharded"; }
  // Held-out quality in [0, 1] (classification or pair accuracy); -1 when the model has none.
  virtual double accuracy(const Weights& W, const io::Dataset& data) const = 0;
  // Extra values for the metrics line; `test` may be null.
  virtual NamedValues metrics(const Weights& W, const io::Dataset& train, int64_t limit,
                              const io::Dataset* test) const {
    (void)W;
    (void)train;
    (void)limit;
    (void)test;
    return {};
  }
};

}  // namespace sfb::api
