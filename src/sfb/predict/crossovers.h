#pragma once
// Where the winner changes: the fastest scheme over node counts (sfb-plan's "crossover in N") and
// the candidates ranked for comm.scheme = "auto", from the predictor (scheme_model.h).
#include <string>
#include <vector>

#include "sfb/predict/scheme_model.h"

namespace sfb::predict {

// The fastest of `schemes` at each N in `nodes` on `base` (its nodes replaced by each N).
struct Crossover {
  int nodes = 0;
  std::string from, to;  // the winner below and at `nodes`
};
std::vector<Crossover> crossovers(const SchemeProfile& p, const std::vector<Scheme>& schemes,
                                  const std::vector<int>& nodes, const Target& base);

// comm.scheme = "auto": every candidate's prediction for `nodes` workers, `ranks_per_host` of them
// sharing a host's cores, on the profile's fitted link and shape, fastest first.
std::vector<Prediction> rank_schemes(const SchemeProfile& p, const std::vector<Scheme>& candidates, int nodes,
                                     int ranks_per_host);

}  // namespace sfb::predict
