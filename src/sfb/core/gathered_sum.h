#pragma once
// The one inner kernel of feature-major W (sfb/core/tensor.h): add a weighted sum of gathered
// contiguous rows to a contiguous row,
//   y[j] += sum_{e < terms} a[e] * base[idx[e] * stride + j],   j in [0, n),
// with the sum accumulated from 0 in e order before it is added to y. The sparse update applies
// every column's non-zeros this way (y = a stored row of W, the rows are u's), and a sparse row's
// logits are the same sum over its non-zeros (y = a row of logits, the rows are W's).
//
// Vector width: one portable binary carries a baseline (SSE2), an AVX2 and an AVX-512 version and
// picks the widest the CPU has at the first call (SFB_SIMD=baseline|avx2|avx512 caps it). Every
// version computes the same floats: the sum is element-wise (no horizontal reductions) and products
// are never fused into FMAs (the file is built with -ffp-contract=off), so replicas on different
// CPUs stay bitwise identical. The order of additions equals the row-major kernels' (each element
// accumulated from 0 over the same entries, then added once): a sparse model gives the same W in
// both layouts.
#include <cstdint>
#include <string_view>

namespace sfb {

enum class Simd : uint8_t { kBaseline, kAvx2, kAvx512 };

// The version add_gathered() runs: the widest this CPU supports, capped by SFB_SIMD.
Simd active_simd();
std::string_view simd_name(Simd s);
// Whether this CPU can run `s`.
bool simd_supported(Simd s);

void add_gathered(int64_t n, int64_t terms, const float* a, const int32_t* idx, const float* base, int64_t stride,
                  float* y);
// The same with an explicit version (tests and benchmarks; `s` must be supported).
void add_gathered(Simd s, int64_t n, int64_t terms, const float* a, const int32_t* idx, const float* base,
                  int64_t stride, float* y);

}  // namespace sfb
