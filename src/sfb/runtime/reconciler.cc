#include "sfb/runtime/reconciler.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "sfb/core/error.h"
#include "sfb/core/row_blocks.h"
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
  // In row blocks of at most 16 MiB (and a sixteenth of W): the consensus never needs a second W.
  const int64_t per = reconcile_block_rows(W.rows(), W.cols());
  double spread = 0, norm2 = 0;
  for (int64_t r0 = 0; r0 < W.rows(); r0 += per) {
    const int64_t n = std::min(per, W.rows() - r0);
    auto w = W.middleRows(r0, n);
    mean_ = w;
    // The sum in rank order: every worker gets the same bits, so the consensus is one matrix.
    allreduce_->run(std::span<float>(mean_.data(), static_cast<size_t>(mean_.size())), calls_++);
    mean_ *= 1.0f / static_cast<float>(workers_);
    spread += static_cast<double>((w - mean_).squaredNorm());
    norm2 += static_cast<double>(mean_.squaredNorm());
    if (mode_ == Mode::kSum) {
      auto base = base_.middleRows(r0, n);
      w = base + static_cast<float>(gain_) * (mean_ - base);
      base = w;
    } else {
      w = mean_;
    }
  }
  auto spread_f = static_cast<float>(spread);
  allreduce_->run(std::span<float>(&spread_f, 1), calls_++);
  const double drift = norm2 > 0 ? std::sqrt(static_cast<double>(spread_f) / workers_ / norm2) : 0.0;
  last_ = clock;
  ++stats_.count;
  stats_.seconds += sw.seconds();
  stats_.last_drift = drift;
  stats_.max_drift = std::max(stats_.max_drift, drift);
  return drift;
}

}  // namespace sfb::runtime
