#include "lr_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace sfb {

namespace {
constexpr int64_t kMinTrial = 30, kMaxTrial = 1000;
constexpr int kLowest = -8, kHighest = 8;  // half-decades: 1e-4 .. 1e4
constexpr int kFirst = -2;                 // 0.1
}  // namespace

int64_t lr_trial_clocks(const OptimizerConfig& opt, int64_t clocks_to_go) {
  const int64_t to_go = std::max<int64_t>(1, clocks_to_go);
  if (opt.lr_search_clocks > 0) return opt.lr_search_clocks;
  return std::min(to_go, std::clamp(to_go / 2, kMinTrial, kMaxTrial));
}

OptimizerConfig lr_trial_optimizer(const OptimizerConfig& run, double lr, int64_t start_clock, int64_t clocks_to_go,
                                   int64_t trial_clocks) {
  OptimizerConfig o = run;
  o.lr = lr;
  o.lr_auto = false;
  o.schedule_origin = start_clock;
  o.schedule_scale =
      static_cast<double>(std::max<int64_t>(1, clocks_to_go)) / static_cast<double>(std::max<int64_t>(1, trial_clocks));
  return o;
}

bool better(const LrScore& a, const LrScore& b) {
  const bool fa = std::isfinite(a.objective), fb = std::isfinite(b.objective);
  if (fa != fb) return fa;
  if (a.quality >= 0 && b.quality >= 0 && a.quality != b.quality) return a.quality > b.quality;
  return a.objective < b.objective;
}

LrSearchResult search_lr(const std::function<LrScore(double)>& trial) {
  LrSearchResult r;
  std::map<int, LrScore> seen;  // half-decade index -> score
  const auto at = [&](int h) {
    if (const auto it = seen.find(h); it != seen.end()) return it->second;
    const double lr = std::pow(10.0, h / 2.0);
    LrScore o = trial(lr);
    if (!std::isfinite(o.objective)) o.objective = std::numeric_limits<double>::infinity();
    if (!std::isfinite(o.quality)) o.quality = -1;
    r.tried.push_back({lr, o});
    return seen[h] = o;
  };
  // Downhill by decades from 0.1: up when 1 beats 0.1, else down.
  int best = kFirst;
  const LrScore first = at(kFirst), above = at(kFirst + 2);
  const int step = better(above, first) ? 2 : -2;
  if (step > 0) best = kFirst + 2;
  for (int next = best + step; next >= kLowest && next <= kHighest && better(at(next), at(best)); next += step)
    best = next;
  for (const int h : {best - 1, best + 1})
    if (h >= kLowest && h <= kHighest && better(at(h), at(best))) best = h;
  r.chosen = std::pow(10.0, best / 2.0);
  r.score = seen.at(best);
  return r;
}

}  // namespace sfb
