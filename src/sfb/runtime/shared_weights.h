#pragma once
// One worker's replica of W, shared by its threads: the stored matrix in the model's layout
// (sfb/core/tensor.h), the scale the true parameters carry (W = scale * stored, Model::prox_scale)
// and the lock. The types say who may do what:
//   * read():  the SF-compute thread, a shared lock for the duration of compute_sf();
//   * write(): the update thread, the exclusive lock while it changes W or its scale;
//   * the update thread is the only writer, so it may also copy W without the lock
//     (materialized(), row_major(), the drift sketch); every other thread reads only through read().
#include <mutex>
#include <shared_mutex>

#include "sfb/api/weights.h"
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

   private:
    friend class SharedWeights;
    explicit Writer(SharedWeights& w) : w_(w), lock_(w.mu_) {}
    SharedWeights& w_;
    std::unique_lock<std::shared_mutex> lock_;
  };

  Reader read() const { return Reader(*this); }
  Writer write() { return Writer(*this); }

  // The update thread (the only writer), or any thread once the threads have ended: W in the
  // stored layout with the scale folded in (a copy), W in file order (J x D row-major), the stored
  // matrix and scale as they are.
  Matrix materialized() const;
  Matrix row_major() const;  // one copy in either layout
  const Matrix& stored_unlocked() const { return stored_; }
  float scale_unlocked() const { return scale_; }
  // After the threads have ended: the true W in file order, moved out when no copy is needed.
  Matrix take_row_major();

 private:
  void fold_scale();
  const int64_t J_, D_;
  const Layout layout_;
  Matrix stored_;
  float scale_ = 1.0f;
  mutable std::shared_mutex mu_;
};

}  // namespace sfb::runtime
