#include "sfb/runtime/replica_drift.h"

#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/core/gemm.h"
#include "sfb/core/rng.h"

namespace sfb::runtime {

DriftSketcher::DriftSketcher(int64_t J, int64_t D, uint64_t seed, int m) : A_(J, m), B_(D, m) {
  Rng rng = make_rng(seed, 0xD81F7);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (Eigen::Index i = 0; i < A_.size(); ++i) A_.data()[i] = n(rng);
  for (Eigen::Index i = 0; i < B_.size(); ++i) B_.data()[i] = n(rng);
}

std::vector<double> DriftSketcher::sketch(const Matrix& W, float scale) {
  gemm(Op::kNone, W, Op::kNone, B_, Y_);  // J x m
  std::vector<double> s(static_cast<size_t>(A_.cols()), 0.0);
  for (Eigen::Index j = 0; j < Y_.rows(); ++j)
    for (Eigen::Index i = 0; i < Y_.cols(); ++i) s[static_cast<size_t>(i)] += double{A_(j, i)} * Y_(j, i);
  for (double& v : s) v *= scale;
  return s;
}

double replica_drift(const std::vector<std::vector<double>>& sketches) {
  const size_t P = sketches.size();
  if (P == 0) return 0.0;
  const size_t m = sketches[0].size();
  // sum_p ||s_p - mean||^2 = (1 / 2P) sum_{p, q} ||s_p - s_q||^2.
  double spread = 0.0;
  for (size_t p = 0; p < P; ++p)
    for (size_t q = p + 1; q < P; ++q)
      for (size_t i = 0; i < m; ++i) spread += (sketches[p][i] - sketches[q][i]) * (sketches[p][i] - sketches[q][i]);
  spread /= static_cast<double>(P) * static_cast<double>(P);  // mean over p of ||s_p - mean||^2
  if (spread == 0.0) return 0.0;
  double size = 0.0;
  for (size_t i = 0; i < m; ++i) {
    double mean = 0.0;
    for (size_t p = 0; p < P; ++p) mean += sketches[p][i];
    mean /= static_cast<double>(P);
    size += mean * mean;
  }
  return size > 0.0 ? std::sqrt(spread / size) : std::numeric_limits<double>::infinity();
}

std::optional<double> DriftCollector::add(int64_t clock, int sender, std::vector<double> sketch) {
  auto& at = pending_[clock];
  if (!at.empty() && at.begin()->second.size() != sketch.size())
    throw CommError(fmt::format("replica-drift sketch of clock {} from rank {} has {} values, others {}", clock, sender,
                                sketch.size(), at.begin()->second.size()));
  if (!at.emplace(sender, std::move(sketch)).second)
    throw CommError(fmt::format("second replica-drift sketch of clock {} from rank {}", clock, sender));
  if (static_cast<int>(at.size()) < workers_) return std::nullopt;
  std::vector<std::vector<double>> all;
  for (auto& [rank, s] : at) all.push_back(std::move(s));
  // Older clocks that never completed (a rank that skipped them under ASP) are dropped with it.
  pending_.erase(pending_.begin(), std::next(pending_.find(clock)));
  return replica_drift(all);
}

}  // namespace sfb::runtime
