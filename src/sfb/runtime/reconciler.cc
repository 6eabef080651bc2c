#include "sfb/runtime/reconciler.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "sfb/core/error.h"
#include "sfb/core/timer.h"

namespace sfb::runtime {

Reconciler::Reconciler(comm::Channel& channel, int workers, int replicas_per_update, Mode mode, int64_t every,
                       int64_t start_clock, const Matrix& base)
    : allreduce_(std::make_unique<comm::RankOrderAllreduce>(channel, workers)),
      workers_(workers),
      gain_(static_cast<double>(workers) / std::max(1, replicas_per_update)),
      mode_(mode),
      every_(every),
      last_(start_clock) {
  SFB_ENFORCE(workers >= 1 && replicas_per_update >= 1 && replicas_per_update <= workers && every >= 0,
              "reconciler: P {} Q+1 {} every {}", workers, replicas_per_update, every);
  if (mode_ == Mode::kSum) base_ = base;
}

double Reconciler::reconcile(Matrix& W, int64_t clock) {
  Stopwatch sw;
  mean_ = W;
  // The sum in rank order: every worker gets the same bits, so the consensus is one matrix.
  allreduce_->run(std::span<float>(mean_.data(), static_cast<size_t>(mean_.size())), calls_++);
  mean_ *= 1.0f / static_cast<float>(workers_);
  float spread = (W - mean_).squaredNorm();
  allreduce_->run(std::span<float>(&spread, 1), calls_++);
  const double norm2 = static_cast<double>(mean_.squaredNorm());
  const double drift = norm2 > 0 ? std::sqrt(static_cast<double>(spread) / workers_ / norm2) : 0.0;
  if (mode_ == Mode::kSum) {
    W = base_ + static_cast<float>(gain_) * (mean_ - base_);
    base_ = W;
  } else {
    W = mean_;
  }
  last_ = clock;
  ++stats_.count;
  stats_.seconds += sw.seconds();
  stats_.last_drift = drift;
  stats_.max_drift = std::max(stats_.max_drift, drift);
  return drift;
}

}  // namespace sfb::runtime
