// optimizer.lr = "auto": the learning-rate search's policy, shared by both modes (sfbd's sfb and
// mgwfbp jobs run the trials; this file decides which rates, how long, and which one wins).
//
// Each candidate trains a trial of H clocks from the run's start with the run's decay schedule
// compressed into those H clocks (the trial ends at the step the run ends with), and is judged on
// rows no trial trained on: by its held-out quality (accuracy) where the model has one, the
// objective breaking ties, else by its held-out objective; a diverged trial loses to any other.
// H is half the clocks the run has to go, at least 30 and at most 1000
// (optimizer.lr_search_clocks sets it instead): large rates can spend a few hundred clocks in a
// transient (logits blown up, objective above the start) before they win, and a rate that leads
// early can lose later, so short trials rank them wrong. The rates are searched on the
// half-decade grid 1e-4 .. 1e4: from 0.1 downhill by decades while the score improves, then the
// best decade's two half-decade neighbours (the score after H clocks is taken to be unimodal in
// log lr on this grid).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sfb/core/config.h"

namespace sfb {

// Clocks each trial trains, for a run with `clocks_to_go` clocks left.
int64_t lr_trial_clocks(const OptimizerConfig& opt, int64_t clocks_to_go);

// The optimizer of a trial at `lr` of `trial_clocks` clocks from `start_clock`, for a run with
// `clocks_to_go` clocks left: a number (no search of its own) whose decay walks the run's schedule.
OptimizerConfig lr_trial_optimizer(const OptimizerConfig& run, double lr, int64_t start_clock, int64_t clocks_to_go,
                                   int64_t trial_clocks);

// What a trial ended at, on the held-out rows.
struct LrScore {
  double quality = -1;   // accuracy in [0, 1]; -1: the model has none
  double objective = 0;  // +inf when the trial diverged (any non-finite value is taken as +inf)
};

// Whether `a` beats `b` by the rule above.
bool better(const LrScore& a, const LrScore& b);

struct LrTrialResult {
  double lr = 0;
  LrScore score;
};

struct LrSearchResult {
  std::vector<LrTrialResult> tried;  // in the order run
  double chosen = 0;                 // the best score's rate
  LrScore score;                     // its score
};

// Runs `trial(lr)` for the candidates described above; each rate at most once. Deterministic when
// `trial` is.
LrSearchResult search_lr(const std::function<LrScore(double)>& trial);

}  // namespace sfb
