#pragma once
// sfb-gradcheck's check, usable from tests: do a model's sufficient factors add up to the gradient
// of its loss? For a batch of K samples, the SFs of a gradient model give
//   G = (1/K) sum_i u_i v_i^T  (+ the regulariser's gradient, (W - prox_t(W)) / t for small t),
// and for random unit directions E the directional derivative <G, E> must match the central
// difference (f(W + hE) - f(W - hE)) / 2h of the model's loss f on that batch (Model::batch_loss,
// or objective() on the batch's rows). Dense and sparse data alike; the model's own init() plus a
// random perturbation (so that W is not a special point such as 0) is where it is checked.
#include <cstdint>
#include <string>
#include <vector>

#include "sfb/api/model.h"

namespace sfb::models {

struct GradcheckOptions {
  int64_t samples = 8;     // K rows of the batch
  int64_t directions = 6;  // random directions E
  // Finite-difference steps along a unit-Frobenius E, times max(1, ||W||_F). Each direction keeps
  // the step that agrees best: large steps drown in curvature (non-smooth losses such as the lasso's
  // change of active set), small ones in the rounding noise of a loss computed in float; a wrong
  // gradient disagrees at every step.
  std::vector<double> steps = {1e-1, 3e-2, 1e-2, 3e-3, 1e-3};
  // |fd - sf| <= tolerance * max(|fd|, |sf|, 1e-3 ||G||_F, 1e-6 max(1, |f|) / h), the last term
  // being that rounding noise.
  double tolerance = 2e-2;
  uint64_t seed = 1;
};

struct GradcheckDirection {
  double finite_difference = 0, from_sf = 0, error = 0;  // error: relative, as in tolerance
  double step = 0;                                       // the step that gave finite_difference
};

struct GradcheckResult {
  int64_t samples = 0;
  double loss = 0;              // at W
  double gradient_norm = 0;     // ||G||_F
  double regulariser_norm = 0;  // ||(W - prox_t(W)) / t||_F (0 without a proximal step)
  std::vector<GradcheckDirection> directions;
  double worst_error = 0;
  // A model with a shrinkage prox (prox_scale != 1) is handed W = scale * stored with scale != 1
  // by the runtime: its SFs are computed again from W given as 0.5 * (2 W) and must not change.
  // The relative difference of the two gradients (-1: not checked, the model's scale is always 1).
  double scale_error = -1;
  bool passed = false;
};

// Throws InvalidArgument when the model's SFs are not a gradient (UpdateRule::kAsWritten).
GradcheckResult gradcheck(api::Model& model, const io::Dataset& data, const GradcheckOptions& opt);

}  // namespace sfb::models
