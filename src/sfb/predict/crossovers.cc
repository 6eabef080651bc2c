#include "sfb/predict/crossovers.h"

#include <algorithm>
#include <limits>

namespace sfb::predict {

std::vector<Crossover> crossovers(const SchemeProfile& p, const std::vector<Scheme>& schemes,
                                  const std::vector<int>& nodes, const Target& base) {
  std::vector<Crossover> out;
  std::string prev;
  for (int n : nodes) {
    Target t = base;
    t.nodes = n;
    std::string best;
    double best_s = std::numeric_limits<double>::infinity();
    for (const auto& s : schemes) {
      const Prediction r = predict(p, s, t);
      if (r.clock_s < best_s) {
        best_s = r.clock_s;
        best = r.label();
      }
    }
    if (!prev.empty() && best != prev) out.push_back({n, prev, best});
    prev = best;
  }
  return out;
}

std::vector<Prediction> rank_schemes(const SchemeProfile& p, const std::vector<Scheme>& candidates, int nodes,
                                     int ranks_per_host) {
  std::vector<Prediction> out;
  for (const auto& s : candidates) out.push_back(predict(p, s, Target{nodes, p.link, ranks_per_host, true}));
  std::stable_sort(out.begin(), out.end(),
                   [](const Prediction& a, const Prediction& b) { return a.clock_s < b.clock_s; });
  return out;
}

}  // namespace sfb::predict
