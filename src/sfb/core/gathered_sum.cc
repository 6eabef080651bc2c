// Built with -ffp-contract=off (src/sfb/CMakeLists.txt): see gathered_sum.h.
#include "sfb/core/gathered_sum.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sfb/core/error.h"

namespace sfb {
namespace {

// One tile of T floats of y: T / width independent accumulators, enough to hide the add latency.
template <int T>
[[gnu::always_inline]] inline void tile(int64_t j0, int64_t terms, const float* a, const int32_t* idx,
                                        const float* base, int64_t stride, float* y) {
  float acc[T] = {};
  for (int64_t e = 0; e < terms; ++e) {
    const float ae = a[e];
    const float* x = base + int64_t{idx[e]} * stride + j0;
    for (int q = 0; q < T; ++q) acc[q] += ae * x[q];
  }
  for (int q = 0; q < T; ++q) y[j0 + q] += acc[q];
}

// The last n - j0 < T floats.
[[gnu::always_inline]] inline void tail(int64_t j0, int64_t n, int64_t terms, const float* a, const int32_t* idx,
                                        const float* base, int64_t stride, float* y) {
  for (int64_t j = j0; j < n; ++j) {
    float acc = 0.0f;
    for (int64_t e = 0; e < terms; ++e) acc += a[e] * base[int64_t{idx[e]} * stride + j];
    y[j] += acc;
  }
}

// Tiles of T floats, then of one vector (V floats: short rows such as J = 20 classes), then scalars.
template <int T, int V>
[[gnu::always_inline]] inline void body(int64_t n, int64_t terms, const float* a, const int32_t* idx, const float* base,
                                        int64_t stride, float* y) {
  int64_t j0 = 0;
  for (; j0 + T <= n; j0 += T) tile<T>(j0, terms, a, idx, base, stride, y);
  for (; j0 + V <= n; j0 += V) tile<V>(j0, terms, a, idx, base, stride, y);
  tail(j0, n, terms, a, idx, base, stride, y);
}

// 16 xmm registers: 8 accumulators of 4 floats.
void add_baseline(int64_t n, int64_t terms, const float* a, const int32_t* idx, const float* base, int64_t stride,
                  float* y) {
  body<32, 4>(n, terms, a, idx, base, stride, y);
}

#if defined(__x86_64__)
// 16 ymm registers: 8 accumulators of 8 floats.
[[gnu::target("avx2")]] void add_avx2(int64_t n, int64_t terms, const float* a, const int32_t* idx, const float* base,
                                      int64_t stride, float* y) {
  body<64, 8>(n, terms, a, idx, base, stride, y);
}
// 32 zmm registers: 8 accumulators of 16 floats.
[[gnu::target("avx512f")]] void add_avx512(int64_t n, int64_t terms, const float* a, const int32_t* idx,
                                           const float* base, int64_t stride, float* y) {
  body<128, 16>(n, terms, a, idx, base, stride, y);
}
#endif

Simd pick() {
  Simd best = Simd::kBaseline;
  if (simd_supported(Simd::kAvx512))
    best = Simd::kAvx512;
  else if (simd_supported(Simd::kAvx2))
    best = Simd::kAvx2;
  if (const char* cap = std::getenv("SFB_SIMD"); cap && *cap) {
    const std::string c = cap;
    Simd want;
    if (c == "baseline")
      want = Simd::kBaseline;
    else if (c == "avx2")
      want = Simd::kAvx2;
    else if (c == "avx512")
      want = Simd::kAvx512;
    else
      throw InvalidArgument("SFB_SIMD = \"" + c + "\": use baseline, avx2 or avx512");
    best = std::min(best, want);
  }
  return best;
}

}  // namespace

bool simd_supported(Simd s) {
#if defined(__x86_64__)
  switch (s) {
    case Simd::kBaseline: return true;
    case Simd::kAvx2: return __builtin_cpu_supports("avx2");
    case Simd::kAvx512: return __builtin_cpu_supports("avx512f");
  }
  return false;
#else
  return s == Simd::kBaseline;
#endif
}

std::string_view simd_name(Simd s) {
  switch (s) {
    case Simd::kBaseline: return "baseline";
    case Simd::kAvx2: return "avx2";
    case Simd::kAvx512: return "avx512";
  }
  return "?";
}

Simd active_simd() {
  static const Simd s = pick();
  return s;
}

using Fn = void (*)(int64_t, int64_t, const float*, const int32_t*, const float*, int64_t, float*);

static Fn kernel(Simd s) {
#if defined(__x86_64__)
  if (s == Simd::kAvx512) return add_avx512;
  if (s == Simd::kAvx2) return add_avx2;
#endif
  return add_baseline;
}

void add_gathered(Simd s, int64_t n, int64_t terms, const float* a, const int32_t* idx, const float* base,
                  int64_t stride, float* y) {
  SFB_ENFORCE(simd_supported(s), "this CPU cannot run the {} kernel", simd_name(s));
  kernel(s)(n, terms, a, idx, base, stride, y);
}

void add_gathered(int64_t n, int64_t terms, const float* a, const int32_t* idx, const float* base, int64_t stride,
                  float* y) {
  static const Fn fn = kernel(active_simd());
  fn(n, terms, a, idx, base, stride, y);
}

}  // namespace sfb
