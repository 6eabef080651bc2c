#include "sfb/core/gathered_sum.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace sfb {
namespace {

// The reference: each element's sum accumulated from 0 in entry order, then added (gathered_sum.h).
void reference(int64_t n, int64_t terms, const float* a, const int32_t* idx, const float* base, int64_t stride,
               float* y) {
  for (int64_t j = 0; j < n; ++j) {
    volatile float acc = 0.0f;  // no vectorisation, no contraction: one float operation at a time
    for (int64_t e = 0; e < terms; ++e) {
      volatile float p = a[e] * base[idx[e] * stride + j];
      acc = acc + p;
    }
    y[j] = y[j] + acc;
  }
}

// Every version this CPU runs gives the reference's bits, for lengths around every tile width.
TEST(GatheredSum, EveryVectorWidthGivesTheSameBits) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t stride = 300, rows = 11;
  std::vector<float> base(static_cast<size_t>(stride * rows));
  for (auto& x : base) x = u(rng);
  int versions = 0;
  for (const Simd s : {Simd::kBaseline, Simd::kAvx2, Simd::kAvx512}) {
    if (!simd_supported(s)) continue;
    ++versions;
    for (const int64_t n : {0, 1, 7, 31, 32, 33, 63, 64, 65, 127, 128, 129, 300}) {
      for (const int64_t terms : {0, 1, 2, 5}) {
        std::vector<float> a(static_cast<size_t>(terms));
        std::vector<int32_t> idx(static_cast<size_t>(terms));
        for (int64_t e = 0; e < terms; ++e) {
          a[static_cast<size_t>(e)] = u(rng);
          idx[static_cast<size_t>(e)] = static_cast<int32_t>(rng() % rows);
        }
        std::vector<float> y(static_cast<size_t>(n)), want;
        for (auto& x : y) x = u(rng);
        want = y;
        reference(n, terms, a.data(), idx.data(), base.data(), stride, want.data());
        add_gathered(s, n, terms, a.data(), idx.data(), base.data(), stride, y.data());
        ASSERT_EQ(y, want) << simd_name(s) << " n " << n << " terms " << terms;
      }
    }
  }
  EXPECT_GE(versions, 1);
  EXPECT_TRUE(simd_supported(active_simd()));
}

}  // namespace
}  // namespace sfb
