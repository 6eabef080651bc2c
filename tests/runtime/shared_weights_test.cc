// SharedWeights (runtime/shared_weights.h) alone: the stored layout against file order, the scale
// a shrinkage prox keeps instead of touching W, and the streams in and out.
#include "sfb/runtime/shared_weights.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace sfb::runtime {
namespace {

Matrix counting(int64_t J, int64_t D) {
  Matrix W(J, D);
  for (int64_t j = 0; j < J; ++j)
    for (int64_t d = 0; d < D; ++d) W(j, d) = static_cast<float>(j * 100 + d);
  return W;
}

TEST(SharedWeights, FeatureMajorStoresTheTransposeAndStreamsFileOrder) {
  const Matrix W = counting(3, 5);
  SharedWeights w(3, 5, Layout::kFeatureMajor);
  w.write().assign_row_major(W);
  EXPECT_EQ(w.stored_unlocked(), Matrix(W.transpose()));
  EXPECT_EQ(w.row_major_copy(), W);
  const RowSource src = w.read().file_order();
  ASSERT_EQ(src.rows, 3);
  ASSERT_EQ(src.cols, 5);
  Matrix rows(2, 5);
  src.read(1, 2, rows.data());  // rows 1 and 2, row-major
  EXPECT_EQ(rows, Matrix(W.bottomRows(2)));
}

TEST(SharedWeights, TheScaleIsPartOfWUntilFoldedIn) {
  const Matrix W = counting(2, 4);
  SharedWeights w(2, 4, Layout::kRowMajor);
  w.write().assign_row_major(W);
  w.write().set_scale(0.5f);
  EXPECT_EQ(w.stored_unlocked(), W);  // the stored matrix is untouched
  EXPECT_EQ(w.row_major_copy(), Matrix(0.5f * W));
  Matrix snapshot;
  w.copy_materialized(snapshot);
  EXPECT_EQ(snapshot, Matrix(0.5f * W));
  w.write().fold_scale_if_far();  // 0.5 is near: kept as a scale
  EXPECT_EQ(w.scale_unlocked(), 0.5f);
  w.write().set_scale(1e-4f);
  w.write().fold_scale_if_far();  // far: folded in
  EXPECT_EQ(w.scale_unlocked(), 1.0f);
  EXPECT_EQ(w.stored_unlocked(), Matrix(1e-4f * W));
}

TEST(SharedWeights, AStreamInResetsTheScaleAndAnyNonFiniteValueIsSeen) {
  const Matrix W = counting(4, 3);
  SharedWeights w(4, 3, Layout::kFeatureMajor);
  w.write().set_scale(3.0f);
  {
    auto writer = w.write();
    const RowSink sink = writer.assign_rows();
    sink(0, 2, W.topRows(2).eval().data());
    sink(2, 2, W.bottomRows(2).eval().data());
  }
  EXPECT_EQ(w.scale_unlocked(), 1.0f);
  EXPECT_EQ(w.row_major_copy(), W);
  EXPECT_TRUE(w.read().all_finite());
  w.write().stored()(1, 2) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(w.read().all_finite());
}

}  // namespace
}  // namespace sfb::runtime
