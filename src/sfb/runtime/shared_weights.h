#pragma once
// One worker's replica of W, shared by its threads: the stored matrix in the model's layout
// (sfb/core/tensor.h), the scale the true parameters carry (W = scale * stored, Model::prox_scale)
// and the lock. The types say who may do what:
//   * read():  the SF-compute thread, a shared lock for the duration of compute_sf();
//   * write(): the update thread, the exclusive lock while it changes W or its scale;
//   * the objective monitor (rank 0) reads W in place under read() (objective_monitor.h);
//   * the update thread is the only writer, so it may also read W without the lock (a snapshot
//     copy, the drift sketch); every other thread reads only through read().
// W is never copied whole on the way out: checksums, model files and checkpoints stream it in file
// order, a row block at a time (file_order(), core/row_blocks.h).
#include <mutex>
#include <shared_mutex>

#include "sfb/api/weights.h"
#include "sfb/core/row_blocks.h"
#include "sfb/core/tensor.h"

namespace sfb::runtime {

class SharedWeights {
 public:
  // Zero W (J x D logically) stored in `layout`.
  SharedWeights(int64_t J, int64_t D, Layout layout);
  SharedWeights(const SharedWeights&) = delete;
  SharedWeights& operator=(const SharedWeights&) = delete;

  int64_t J() const { return J_; }
  int64_t D() const { return D_; }
  Layout layout() const { return layout_; }

  class Reader {
   public:
    // W as the model reads it: the stored matrix, its scale and layout.
    api::Weights weights() const { return api::Weights{w_.stored_, w_.scale_, w_.layout_}; }
    // The true W (scale folded in) in file order, streamed; valid while this Reader lives.
    RowSource file_order() const { return w_.file_order_unlocked(); }
    bool all_finite() const { return w_.all_finite_unlocked(); }

   private:
    friend class SharedWeights;
    explicit Reader(const SharedWeights& w) : w_(w), lock_(w.mu_) {}
    const SharedWeights& w_;
    std::shared_lock<std::shared_mutex> lock_;
  };

  class Writer {
   public:
    Matrix& stored() { return w_.stored_; }
    MatrixMap view() { return sfb::view(w_.stored_); }
    float scale() const { return w_.scale_; }
    void set_scale(float s) { w_.scale_ = s; }
    // Folds the scale into the stored matrix (scale becomes 1).
    void fold_scale() { w_.fold_scale(); }
    // Keeps the stored magnitudes in float range: folds the scale in once it leaves [1e-3, 1e3]
    // (rarely, so a shrinkage prox stays O(1) per batch).
    void fold_scale_if_far() {
      if (w_.scale_ < 1e-3f || w_.scale_ > 1e3f) w_.fold_scale();
    }
    // W (file order, J x D row-major) replaces the replica; scale 1.
    void assign_row_major(const Matrix& W);
    // The same, streamed: rows in file order go into the stored matrix (the scale becomes 1 first).
    RowSink assign_rows();

   private:
    friend class SharedWeights;
    explicit Writer(SharedWeights& w) : w_(w), lock_(w.mu_) {}
    SharedWeights& w_;
    std::unique_lock<std::shared_mutex> lock_;
  };

  Reader read() const { return Reader(*this); }
  Writer write() { return Writer(*this); }

  // The update thread (the only writer), or any thread once the threads have ended: W in the stored
  // layout with the scale folded in, copied into `out` (whose memory is reused: the monitor's one
  // snapshot); the true W in file order, streamed; the stored matrix and scale as they are.
  void copy_materialized(Matrix& out) const;
  RowSource file_order_unlocked() const { return row_source(stored_, layout_, scale_); }
  bool all_finite_unlocked() const;
  const Matrix& stored_unlocked() const { return stored_; }
  float scale_unlocked() const { return scale_; }
  // A copy of the true W in file order (tests and small models; the runtime streams it instead).
  Matrix row_major_copy() const;

 private:
  void fold_scale();
  const int64_t J_, D_;
  const Layout layout_;
  Matrix stored_;
  float scale_ = 1.0f;
  mutable std::shared_mutex mu_;
};

}  // namespace sfb::runtime
