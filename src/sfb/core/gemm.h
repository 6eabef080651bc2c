#pragma once
// Dense matrix products through a tuned, runtime-dispatched BLAS: Debian's OpenBLAS (the OpenMP
// flavour, built with DYNAMIC_ARCH: it picks the kernels for the CPU it runs on, AVX-512 where
// there is AVX-512, so the binary stays portable without -march=native). Every dense GEMM of the
// update path, the models, the baselines and the CNN's fully connected layers goes through here.
//
// Threads: BLAS runs on the OpenMP threads of the calling thread's team, set_blas_threads()
// (runtime.threads) for every call; one number means the same thing for Eigen, OpenMP and BLAS.
//
// Determinism: for the same shapes, kernel and thread count the sums are formed in the same order,
// so BSP replicas stay bitwise identical; blas_fingerprint() names the kernel and threads so that
// every rank can check they agree (sfbd refuses a job whose ranks would pick different kernels).
#include <cstdint>
#include <string>

#include "sfb/core/tensor.h"

namespace sfb {

enum class Op { kNone, kTranspose };

// C = alpha * op(A) * op(B) + beta * C, every matrix row-major; op(A) is m x k, op(B) k x n.
void gemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc);

// The same on whole row-major matrices (C is resized when beta == 0).
void gemm(Op op_a, const Matrix& a, Op op_b, const Matrix& b, Matrix& c, float alpha = 1.0f, float beta = 0.0f);

// An SF update in a stored layout (sfb/core/tensor.h): stored rows [row_begin, row_begin + rows) of
// out = alpha * dW + beta * out, where dW = U^T V (J x D) row-major, or dW^T = V^T U (D x J)
// feature-major; U is K x J and V is K x D, row-major. One GEMM with the transposes folded in.
// `out` points at stored row row_begin (a whole stored matrix's data() + row_begin * cols, or a
// buffer of just those rows).
void gemm_uv(Layout layout, int64_t J, int64_t D, int64_t K, float alpha, const float* u, const float* v, float beta,
             float* out, int64_t row_begin, int64_t rows);

// The threads of every parallel region from now on (at least 1): Eigen's, this thread's OpenMP
// default (oneDNN runs there) and every BLAS call's. runtime.threads sets it once per rank.
void set_compute_threads(int threads);
// "OpenBLAS 0.3.21 SkylakeX, 1 thread": the kernel family the library chose for this CPU.
std::string blas_info();
// A number that differs when two processes would compute a GEMM differently (kernel, threads).
uint64_t blas_fingerprint();

}  // namespace sfb
