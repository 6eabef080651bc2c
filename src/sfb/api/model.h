#pragma once
// The model interface. A model declares the shape of its parameter matrix W (J x D), computes
// sufficient factors for a minibatch from the current W through an SfWriter, may supply a
// proximal step applied by the update thread, and evaluates its objective. Staleness and the
// broadcast topology are configuration, never model code.
//
// Threads: compute_sf() runs on the SF-compute thread with W read-locked (the update thread does
// not write W meanwhile); prox() runs on the update thread with W write-locked; objective() and
// accuracy() run on rank 0's monitor thread on a snapshot of W.
#include <cstdint>
#include <string>

#include "sfb/api/minibatch.h"
#include "sfb/api/sf_writer.h"
#include "sfb/core/rng.h"
#include "sfb/io/dataset.h"

namespace sfb::api {

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  // Parameter shape for data of dimension `dim` with `classes` classes.
  virtual int64_t rows(const io::Dataset& train) const = 0;  // J
  virtual int64_t cols(const io::Dataset& train) const = 0;  // D
  // W arrives sized J x D and zeroed; every rank calls this with the same rng state.
  virtual void init(Matrix& W, Rng& rng) { (void)W; (void)rng; }
  // Writes batch.size() SF pairs (unscaled gradient factors) and calls out.commit().
  virtual void compute_sf(const Matrix& W, const MiniBatch& batch, SfWriter& out) = 0;
  virtual bool has_prox() const { return false; }
  virtual void prox(Matrix& W, double step) { (void)W; (void)step; }
  // Mean loss over the first `limit` rows of `data` (all when limit <= 0 or > n).
  virtual double objective(const Matrix& W, const io::Dataset& data, int64_t limit) const = 0;
  // Fraction of correctly predicted rows; -1 when the model has no notion of accuracy.
  virtual double accuracy(const Matrix& W, const io::Dataset& data) const = 0;
};

}  // namespace sfb::api
