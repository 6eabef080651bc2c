#include "sfb/runtime/update_applier.h"

#include <random>

#include <gtest/gtest.h>

namespace sfb::runtime {
namespace {

SfBatch make_batch(int k, int J, int D, bool sparse, std::mt19937& rng) {
  SfBatch b;
  b.count = k;
  b.J = J;
  b.D = D;
  b.sparse_v = sparse;
  b.u = Matrix::Random(k, J);
  if (!sparse) {
    b.v = Matrix::Random(k, D);
    return b;
  }
  b.v_row_ptr.push_back(0);
  for (int i = 0; i < k; ++i) {
    for (int c = 0; c < D; ++c) {
      if (rng() % 5 == 0) {
        b.v_index.push_back(c);
        b.v_value.push_back(static_cast<float>(rng() % 100) / 50.0f - 1.0f);
      }
    }
    b.v_row_ptr.push_back(static_cast<int64_t>(b.v_index.size()));
  }
  return b;
}

// W + sum_b sum_i u_i v_i^T, in double.
Eigen::MatrixXd reference(const Matrix& W0, const std::vector<SfBatch>& batches) {
  Eigen::MatrixXd W = W0.cast<double>();
  for (const auto& b : batches) {
    for (int i = 0; i < b.count; ++i) {
      for (int j = 0; j < b.J; ++j) {
        if (!b.sparse_v) {
          for (int c = 0; c < b.D; ++c) W(j, c) += double{b.u(i, j)} * b.v(i, c);
        } else {
          for (int64_t k = b.v_row_ptr[i]; k < b.v_row_ptr[i + 1]; ++k)
            W(j, b.v_index[k]) += double{b.u(i, j)} * b.v_value[k];
        }
      }
    }
  }
  return W;
}

class Shapes : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(Shapes, MergedUpdateEqualsTheSumOfAllPairs) {
  auto [J, D, threads, kind] = GetParam();  // kind: 0 dense, 1 sparse, 2 mixed
  std::mt19937 rng(J * 31 + D);
  std::vector<SfBatch> batches;
  for (int n = 0; n < 3; ++n)
    batches.push_back(make_batch(n == 1 ? 0 : 5 + n, J, D, kind == 1 || (kind == 2 && n == 2), rng));
  const Matrix W0 = Matrix::Random(J, D);
  Matrix W = W0;
  std::vector<const SfBatch*> ptrs;
  for (const auto& b : batches) ptrs.push_back(&b);
  UpdateApplier applier(threads);
  applier.apply(W, ptrs);
  const Eigen::MatrixXd ref = reference(W0, batches);
  EXPECT_LT((W.cast<double>() - ref).cwiseAbs().maxCoeff(), 1e-4) << "J " << J << " D " << D;
  // Applying one batch at a time gives the same result up to rounding, and the same bits on
  // every repetition (what keeps BSP replicas identical).
  Matrix W1 = W0, W2 = W0;
  for (const auto& b : batches) applier.apply(W1, b);
  for (const auto& b : batches) applier.apply(W2, b);
  EXPECT_LT((W1.cast<double>() - ref).cwiseAbs().maxCoeff(), 1e-4);
  EXPECT_EQ(W1, W2);
}

INSTANTIATE_TEST_SUITE_P(UpdateApplier, Shapes,
                         // J >= 8 and many touched columns take the tiled sparse path; D = 300 crosses tiles.
                         ::testing::Combine(::testing::Values(1, 4, 7, 8, 20), ::testing::Values(1, 9, 300),
                                            ::testing::Values(1, 2), ::testing::Values(0, 1, 2)));

// The same batches in both layouts: feature-major keeps W^T. Sparse v gives the same bits (both
// kernels accumulate every element from 0 over its column's entries in order, then add once), with
// per-batch multipliers too; dense v goes through GEMMs of other shapes (within float rounding).
class Layouts : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(Layouts, FeatureMajorIsTheTransposeOfRowMajor) {
  auto [J, D, threads, kind] = GetParam();  // kind: 0 dense, 1 sparse, 2 mixed
  std::mt19937 rng(J * 7 + D);
  std::vector<SfBatch> batches;
  for (int n = 0; n < 4; ++n)
    batches.push_back(make_batch(n == 1 ? 0 : 3 + n, J, D, kind == 1 || (kind == 2 && n >= 2), rng));
  std::vector<const SfBatch*> ptrs;
  for (const auto& b : batches) ptrs.push_back(&b);
  const std::vector<float> alpha = {1.0f, 0.5f, 1.0f / 3.0f, 2.0f};
  const Matrix W0 = Matrix::Random(J, D);
  UpdateApplier rows(threads, Layout::kRowMajor), features(threads, Layout::kFeatureMajor);
  EXPECT_EQ(features.layout(), Layout::kFeatureMajor);
  for (const bool scaled : {false, true}) {
    Matrix R = W0, F = W0.transpose();
    rows.apply(R, ptrs, scaled ? std::span<const float>(alpha) : std::span<const float>());
    features.apply(F, ptrs, scaled ? std::span<const float>(alpha) : std::span<const float>());
    ASSERT_EQ(F.rows(), D);
    const Matrix back = F.transpose();
    if (kind == 1)
      EXPECT_EQ(back, R) << "J " << J << " D " << D << " scaled " << scaled;
    else
      EXPECT_LT((back - R).cwiseAbs().maxCoeff(), 1e-4f) << "J " << J << " D " << D;
    // One batch at a time (the in-place path for a lone unscaled batch) agrees too.
    Matrix R1 = W0, F1 = W0.transpose();
    for (const auto& b : batches) {
      rows.apply(R1, b);
      features.apply(F1, b);
    }
    if (kind == 1) EXPECT_EQ(Matrix(F1.transpose()), R1);
  }
}

TEST(UpdateApplier, RefusesWOfTheOtherLayoutsShape) {
  std::mt19937 rng(3);
  const SfBatch b = make_batch(2, 5, 9, true, rng);
  UpdateApplier features(1, Layout::kFeatureMajor);
  Matrix W = Matrix::Zero(5, 9);  // J x D: row-major's shape
  try {
    features.apply(W, b);
    FAIL() << "a J x D W was accepted as feature-major";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("feature-major"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(UpdateApplier, Layouts,
                         ::testing::Combine(::testing::Values(1, 8, 70, 129), ::testing::Values(1, 9, 300),
                                            ::testing::Values(1, 2), ::testing::Values(0, 1, 2)));
// A clock's U over 2 MiB (about 15 pairs x J = 40,000 floats): the feature-major sweep runs in tiles
// of J (a tail tile too) and still gives row-major's bits.
INSTANTIATE_TEST_SUITE_P(UpdateApplierTiledJ, Layouts,
                         ::testing::Combine(::testing::Values(40000), ::testing::Values(9), ::testing::Values(1, 2),
                                            ::testing::Values(1)));

}  // namespace
}  // namespace sfb::runtime
