#include "sfb/core/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/core/hash.h"

extern "C" {
char* openblas_get_corename(void);
char* openblas_get_config(void);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int);
}

namespace sfb {
namespace {

#if defined(__x86_64__)
// OpenBLAS's AVX-512 (SkylakeX) kernels return with the upper halves of the vector registers
// dirty. Until a vzeroupper, every legacy-SSE instruction this thread runs afterwards (the
// x86-64 baseline code of the rest of sfb: the sparse sweep, Eigen) pays a merge with those
// halves: measured 1.3x (tiled sparse update) to 5x (scattered sparse update) slower after one
// SGEMM. One vzeroupper after each call puts the registers back in the clean state.
__attribute__((target("avx"))) void clear_upper_avx() { __builtin_ia32_vzeroupper(); }
const bool kHasAvx = __builtin_cpu_supports("avx");
void clean_vector_state() {
  if (kHasAvx) clear_upper_avx();
}
#else
void clean_vector_state() {}
#endif

}  // namespace

void gemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  SFB_ENFORCE(
      m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX && ldb <= INT32_MAX && ldc <= INT32_MAX,
      "gemm of {} x {} x {} exceeds the BLAS's int sizes", m, n, k);
  cblas_sgemm(CblasRowMajor, op_a == Op::kTranspose ? CblasTrans : CblasNoTrans,
              op_b == Op::kTranspose ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
  clean_vector_state();
}

void gemm(Op op_a, const Matrix& a, Op op_b, const Matrix& b, Matrix& c, float alpha, float beta) {
  const int64_t m = op_a == Op::kTranspose ? a.cols() : a.rows();
  const int64_t k = op_a == Op::kTranspose ? a.rows() : a.cols();
  const int64_t kb = op_b == Op::kTranspose ? b.cols() : b.rows();
  const int64_t n = op_b == Op::kTranspose ? b.rows() : b.cols();
  SFB_ENFORCE(k == kb, "gemm: inner dimensions {} and {}", k, kb);
  if (beta == 0.0f) {
    c.resize(m, n);
  } else {
    SFB_ENFORCE(c.rows() == m && c.cols() == n, "gemm: C is {} x {}, the product {} x {}", c.rows(), c.cols(), m, n);
  }
  if (k == 0) {
    if (beta == 0.0f)
      c.setZero();
    else
      c *= beta;
    return;
  }
  gemm(op_a, op_b, m, n, k, alpha, a.data(), a.cols(), b.data(), b.cols(), beta, c.data(), c.cols());
}

void gemm_uv(Layout layout, int64_t J, int64_t D, int64_t K, float alpha, const float* u, const float* v, float beta,
             float* out, int64_t row_begin, int64_t rows) {
  if (layout == Layout::kRowMajor)  // op(A) = U[:, rows]^T (rows x K, read from U's columns), B = V (K x D)
    gemm(Op::kTranspose, Op::kNone, rows, D, K, alpha, u + row_begin, J, v, D, beta, out, D);
  else  // op(A) = V[:, rows]^T (rows x K), B = U (K x J)
    gemm(Op::kTranspose, Op::kNone, rows, J, K, alpha, v + row_begin, D, u, J, beta, out, J);
}

void set_compute_threads(int threads) {
  threads = std::max(1, threads);
  Eigen::setNbThreads(threads);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

std::string blas_info() {
  const int t = openblas_get_num_threads();
  return fmt::format("OpenBLAS {} kernels, {} thread{}", openblas_get_corename(), t, t == 1 ? "" : "s");
}

uint64_t blas_fingerprint() {
  return fnv1a64(fmt::format("{}|{}|{}", openblas_get_config(), openblas_get_corename(), openblas_get_num_threads()));
}

}  // namespace sfb
