#include "sfb/io/sampler.h"

#include <algorithm>
#include <numeric>

#include "sfb/core/error.h"

namespace sfb::io {

EpochSampler::EpochSampler(int64_t n, uint64_t seed, uint64_t stream)
    : perm_(static_cast<size_t>(n)), rng_(make_rng(seed, stream)) {
  SFB_ENFORCE(n > 0, "sampling from an empty partition");
  std::iota(perm_.begin(), perm_.end(), int64_t{0});
  reshuffle();
}

void EpochSampler::reshuffle() {
  // Fisher-Yates with our own index draws, so the order does not depend on the standard library.
  for (size_t i = perm_.size() - 1; i > 0; --i) {
    const size_t j = static_cast<size_t>(rng_() % (i + 1));
    std::swap(perm_[i], perm_[j]);
  }
  pos_ = 0;
}

void EpochSampler::next(int64_t k, std::vector<int64_t>& out) {
  out.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    if (pos_ == perm_.size()) {
      reshuffle();
      ++epoch_;
    }
    out[static_cast<size_t>(i)] = perm_[pos_++];
  }
}

void EpochSampler::skip(int64_t n) {
  while (n > 0) {
    if (pos_ == perm_.size()) {
      reshuffle();
      ++epoch_;
    }
    const auto step = std::min<int64_t>(n, static_cast<int64_t>(perm_.size() - pos_));
    pos_ += static_cast<size_t>(step);
    n -= step;
  }
}

}  // namespace sfb::io
