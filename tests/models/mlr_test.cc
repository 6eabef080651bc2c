#include "sfb/models/mlr.h"

#include <cmath>

#include <gtest/gtest.h>

#include "sfb/io/synthetic.h"
#include "testing/sf_mean.h"

namespace sfb::models {
namespace {

// Gradient of the mean loss over `data` from the SF pairs: G = U^T V / K (u written unscaled).
Matrix sf_gradient(Mlr& m, const Matrix& W, const io::Dataset& data) {
  return testing::sf_mean(m, W, testing::all_rows(data));
}

class MlrGradient : public ::testing::TestWithParam<double> {};

TEST_P(MlrGradient, SfsMatchFiniteDifferences) {
  io::Dataset data = io::make_synthetic({6, 5, 3, GetParam(), 0.0, 11, 0});
  data.add_bias();
  Mlr m(3, data.dim, data.sparse);
  Matrix W = 0.3f * Matrix::Random(3, data.dim);
  const Matrix G = sf_gradient(m, W, data);
  const float eps = 1e-2f;
  for (Eigen::Index j = 0; j < W.rows(); ++j) {
    for (Eigen::Index d = 0; d < W.cols(); ++d) {
      Matrix plus = W, minus = W;
      plus(j, d) += eps;
      minus(j, d) -= eps;
      const double fd = (m.objective(plus, data, 0) - m.objective(minus, data, 0)) / (2.0 * eps);
      EXPECT_NEAR(G(j, d), fd, 2e-3) << "W(" << j << ", " << d << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DenseAndSparse, MlrGradient, ::testing::Values(1.0, 0.4));

TEST(Mlr, ObjectiveOfZeroWeightsIsLogJAndAccuracyCounts) {
  io::Dataset data = io::make_synthetic({50, 4, 5, 1.0, 0.0, 2, 0});
  Mlr m(5, 4, false);
  const Matrix W = Matrix::Zero(5, 4);
  EXPECT_NEAR(m.objective(W, data, 0), std::log(5.0), 1e-5);
  EXPECT_NEAR(m.objective(W, data, 10), std::log(5.0), 1e-5);
  // All-zero logits predict class 0 everywhere.
  const double frac0 = std::count(data.labels.begin(), data.labels.end(), 0) / 50.0;
  EXPECT_DOUBLE_EQ(m.accuracy(W, data), frac0);
}

TEST(Mlr, SparseAndDenseDataGiveTheSameSfs) {
  io::Dataset sparse = io::make_synthetic({8, 20, 3, 0.3, 0.0, 4, 0});
  io::Dataset dense = sparse;
  dense.sparse = false;
  dense.dense = Matrix(sparse.csr);
  // A model writes v as its data comes (sparse_v is fixed for its life): one model per data set.
  Mlr on_sparse(3, 20, true), on_dense(3, 20, false);
  const Matrix W = Matrix::Random(3, 20);
  EXPECT_TRUE(sf_gradient(on_sparse, W, sparse).isApprox(sf_gradient(on_dense, W, dense), 1e-5f));
}

}  // namespace
}  // namespace sfb::models
