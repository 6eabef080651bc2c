#pragma once
// optimizer.lr = "auto" and --find-lr, for both modes: the search (lr_policy.h's policy)
// run through a mode's own trial, its log lines, summary.json's lr_search record and the table and
// plot of --find-lr.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "job.h"
#include "lr_policy.h"
#include "sfb/core/json.h"
#include "sfb/io/dataset.h"

namespace sfbd {

// One trial: the held-out score at the start and after `clocks` clocks (iterations) with `opt`,
// the same on every rank (objective +inf when the trial diverged).
using LrTrialFn = std::function<std::pair<sfb::LrScore, sfb::LrScore>(const sfb::OptimizerConfig& opt, int64_t clocks)>;

// The rows the trials are judged on: rank 0's partition's last fifth, at most eval.train_sample
// rows (a uniform sample of the data under data.partition = "shuffled"), which no trial trains on:
// a rate that memorises the training rows does not win. Other ranks hold nothing out.
struct LrHoldout {
  sfb::io::Dataset rows;   // rank 0: the held-out rows
  int64_t train_rows = 0;  // rank 0: the leading rows the trials train on (0: all, on other ranks)
};
LrHoldout lr_holdout(const Job& job, const sfb::io::Dataset& train);

// Searches the rate of a job starting at `start_clock` (every rank calls it with the same
// trials), records the candidates in `record`, and on success sets job.cfg.optimizer.lr to the
// choice. `unit`: "clocks" or "iterations". Returns the exit code when no rate lowered the
// held-out objective (4).
// `held`: rank 0's held-out rows; none (a partition too small to hold a fifth out) means the trials
// are judged on rows they trained on, which rank 0 warns of and `record` says (judged_by).
std::optional<int> resolve_lr(Job& job, int64_t start_clock, const char* unit, const LrHoldout& held,
                              const LrTrialFn& trial, sfb::Json& record);

// A resumed run of optimizer.lr = "auto" whose checkpoint carries the rate its job chose (`lr` > 0):
// sets job.cfg.optimizer.lr to it without searching again (the run continues the same schedule)
// and records where it came from in `record`; true then. False (nothing changed) under --find-lr,
// which searches anew from the checkpoint, and for a checkpoint without a rate (`lr` = 0).
bool reuse_checkpoint_lr(Job& job, double lr, const std::string& path, sfb::Json& record);

// --find-lr: `record`'s candidates as a table, output.dir/lr_search.csv and a log-log plot of the
// objective against the rate (gnuplot, with the paths as its arguments); nothing trained.
int report_lr_search(Job& job, const sfb::Json& record);

}  // namespace sfbd
