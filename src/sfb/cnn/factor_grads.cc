#include "sfb/cnn/factor_grads.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "sfb/core/error.h"
#include "sfb/core/gemm.h"

namespace sfb::cnn {

SfBatch factor_batch(const Factors& f) {
  SFB_ENFORCE(f.delta && f.input && f.delta->rows() == f.input->rows(), "factors of {} and {} rows",
              f.delta ? f.delta->rows() : -1, f.input ? f.input->rows() : -1);
  SfBatch b;
  b.count = static_cast<int32_t>(f.delta->rows());
  b.J = static_cast<int32_t>(f.delta->cols());
  b.D = static_cast<int32_t>(f.input->cols());
  b.u = *f.delta;
  b.v = *f.input;
  return b;
}

void rebuild_gradient(const std::vector<const SfBatch*>& ranks, float scale, Matrix& dW, Matrix& db,
                      RebuildScratch& scratch) {
  int64_t rows = 0;
  for (const SfBatch* b : ranks) {
    SFB_ENFORCE(b->J == dW.rows() && b->D == dW.cols() && !b->sparse_v, "factors {}x{} for a {}x{} gradient", b->J,
                b->D, dW.rows(), dW.cols());
    rows += b->count;
  }
  scratch.delta.resize(rows, dW.rows());
  scratch.input.resize(rows, dW.cols());
  int64_t at = 0;
  for (const SfBatch* b : ranks) {
    scratch.delta.middleRows(at, b->count) = b->u;
    scratch.input.middleRows(at, b->count) = b->v;
    at += b->count;
  }
  if (rows == 0) {
    dW.setZero();
    db.setZero();
    return;
  }
  gemm(Op::kTranspose, scratch.delta, Op::kNone, scratch.input, dW, scale, 0.0f);
  db.row(0) = scale * scratch.delta.colwise().sum();
}

double time_rebuild_us(int64_t out, int64_t in, int64_t batch, int ranks, int reps) {
  Rng rng = make_rng(0x5F, 0);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<SfBatch> batches(static_cast<size_t>(ranks));
  std::vector<const SfBatch*> ptrs;
  for (SfBatch& b : batches) {
    b.count = static_cast<int32_t>(batch);
    b.J = static_cast<int32_t>(out);
    b.D = static_cast<int32_t>(in);
    b.u.resize(batch, out);
    b.v.resize(batch, in);
    for (Eigen::Index i = 0; i < b.u.size(); ++i) b.u.data()[i] = u(rng);
    for (Eigen::Index i = 0; i < b.v.size(); ++i) b.v.data()[i] = u(rng);
    ptrs.push_back(&b);
  }
  Matrix dW(out, in), db(1, out);
  RebuildScratch scratch;
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    rebuild_gradient(ptrs, 1.0f / static_cast<float>(ranks), dW, db, scratch);
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace sfb::cnn
