// The three models beyond MLR (l2mlr, dml, sparse_coding): their sufficient factors against finite
// differences, their proximal steps, SDCA's duality gap, and training through the runtime (one
// rank decreases the objective; four BSP ranks stay bitwise identical).
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/api/batch_sf_writer.h"
#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/io/load_data.h"
#include "sfb/io/sampler.h"
#include "sfb/io/synthetic.h"
#include "sfb/models/config_model_context.h"
#include "sfb/models/dml.h"
#include "sfb/models/gradcheck.h"
#include "sfb/models/l2mlr.h"
#include "sfb/models/mlr.h"
#include "sfb/models/registry.h"
#include "sfb/models/sparse_coding.h"
#include "sfb/runtime/worker.h"
#include "testing/configs.h"
#include "testing/rank_threads.h"
#include "testing/sf_mean.h"

namespace sfb::models {
namespace {

using ::testing::HasSubstr;

using testing::all_rows;
using testing::sf_mean;

// Central differences of f at every entry of W.
template <typename F>
Matrix finite_diff(const Matrix& W, F f, float eps) {
  Matrix G(W.rows(), W.cols());
  for (Eigen::Index j = 0; j < W.rows(); ++j) {
    for (Eigen::Index d = 0; d < W.cols(); ++d) {
      Matrix plus = W, minus = W;
      plus(j, d) += eps;
      minus(j, d) -= eps;
      G(j, d) = static_cast<float>((f(plus) - f(minus)) / (2.0 * eps));
    }
  }
  return G;
}

Config base_config() { return testing::with_schedule(testing::quiet_synthetic(12, 4, 400, 200), 8, 0.05, 10, 200); }

struct Trained {
  std::vector<runtime::WorkerResult> results;
  std::vector<std::vector<uint64_t>> checksums;  // per rank, per BSP clock
};

Trained train(int p, const Config& cfg) {
  Trained t;
  t.results.resize(static_cast<size_t>(p));
  t.checksums.resize(static_cast<size_t>(p));
  testing::run_ranks(p, [&](comm::Transport& tr) {
    const int r = tr.rank();
    const auto data = io::load_data(cfg.data, cfg.job.seed, r, p, r == 0);
    auto model = make_model(cfg, data.train, data.total_train, r, p);
    runtime::WorkerHooks hooks;
    hooks.on_clock_applied = [&t, r](int64_t, const Matrix& W) {
      t.checksums[static_cast<size_t>(r)].push_back(matrix_checksum(W));
    };
    runtime::Worker w(cfg, tr, data.train, &data.test, *model, hooks);
    t.results[static_cast<size_t>(r)] = w.run();
  });
  return t;
}

// ---- L2-MLR ----------------------------------------------------------------------------------

TEST(L2Mlr, SgdSfsAreTheCrossEntropyGradientAndTheProxIsAShrinkage) {
  Config cfg = base_config();
  cfg.model.name = "l2mlr";
  cfg.model.lambda = 0.3;
  io::Dataset data = io::make_synthetic({6, 5, 3, 1.0, 0.0, 11, 0});
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  auto m = make_model("l2mlr", ctx);
  const Matrix W = 0.3f * Matrix::Random(3, data.dim);
  // The SFs carry the loss gradient; the L2 term is the prox's job.
  const Matrix G = sf_mean(*m, W, all_rows(data));
  const Matrix fd = finite_diff(
      W, [&](const Matrix& X) { return Mlr::cross_entropy(X, data, 0); }, 1e-2f);
  EXPECT_LT((G - fd).cwiseAbs().maxCoeff(), 2e-3f);
  // objective = cross-entropy + lambda/2 ||W||^2; prox of step eta shrinks by 1 / (1 + eta lambda).
  EXPECT_NEAR(m->objective(W, data, 0), Mlr::cross_entropy(W, data, 0) + 0.15 * W.squaredNorm(), 1e-5);
  EXPECT_DOUBLE_EQ(m->prox_scale(0.5), 1.0 / 1.15);
  // A scaled W reads as scale * stored.
  const Matrix G2 = sf_mean(*m, W, all_rows(data), 0.5f);
  const Matrix G2ref = sf_mean(*m, Matrix(0.5f * W), all_rows(data));
  EXPECT_LT((G2 - G2ref).cwiseAbs().maxCoeff(), 1e-5f);
}

// model.C is liblinear's C: lambda = 1 / (C n) over the n training rows of every rank (here 6
// rows of which this rank holds all; then 24 rows in all), whatever model.lambda says.
TEST(L2Mlr, CIsLiblinearsC) {
  Config cfg = base_config();
  cfg.model.name = "l2mlr";
  cfg.model.lambda = 0.3;
  cfg.model.C = 2;
  io::Dataset data = io::make_synthetic({6, 5, 3, 1.0, 0.0, 11, 0});
  const Matrix W = 0.3f * Matrix::Random(3, data.dim);
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  auto m = make_model("l2mlr", ctx);
  EXPECT_DOUBLE_EQ(m->prox_scale(0.5), 1.0 / (1.0 + 0.5 / 12.0));
  EXPECT_NEAR(m->objective(W, data, 0), Mlr::cross_entropy(W, data, 0) + 0.5 / 12.0 * W.squaredNorm(), 1e-5);
  ConfigModelContext ctx4(cfg, data, 24, 0, 4);
  EXPECT_DOUBLE_EQ(make_model("l2mlr", ctx4)->prox_scale(0.5), 1.0 / (1.0 + 0.5 / 48.0));
  cfg.model.C = 0;
  ConfigModelContext ctx0(cfg, data, data.n, 0, 1);
  EXPECT_DOUBLE_EQ(make_model("l2mlr", ctx0)->prox_scale(0.5), 1.0 / 1.15);
}

TEST(L2Mlr, OneRankEqualsTheSerialProximalSgdReference) {
  Config cfg = base_config();
  cfg.model.name = "l2mlr";
  cfg.model.lambda = 0.5;
  cfg.optimizer.lr = 0.2;
  cfg.stop.max_clocks = 300;  // w_scale falls below 1e-3 and is folded into W several times
  const auto res = train(1, cfg).results;
  // Reference: W <- (W - eta/K sum u v^T) / (1 + eta lambda) with an explicit O(JD) shrinkage.
  const auto data = io::load_data(cfg.data, cfg.job.seed, 0, 1, false);
  ConfigModelContext ctx(cfg, data.train, data.total_train, 0, 1);
  auto m = make_model("l2mlr", ctx);
  Matrix W = Matrix::Zero(m->rows(), m->cols());
  io::EpochSampler sampler(data.train.n, cfg.job.seed, 0);
  std::vector<int64_t> rows;
  api::MiniBatch batch;
  for (int64_t c = 0; c < cfg.stop.max_clocks; ++c) {
    sampler.next(cfg.optimizer.minibatch, rows);
    api::gather(data.train, rows, batch);
    batch.clock = c;
    const double eta = cfg.optimizer.lr / (1.0 + cfg.optimizer.lr_decay * static_cast<double>(c));
    W -= static_cast<float>(eta) * sf_mean(*m, W, batch);
    W /= static_cast<float>(1.0 + eta * cfg.model.lambda);
  }
  EXPECT_LT((res[0].W() - W).cwiseAbs().maxCoeff(), 1e-4f * std::max(1.0f, W.cwiseAbs().maxCoeff()));
  EXPECT_NEAR(res[0].W().norm(), W.norm(), 1e-4 * W.norm());
}

// A model whose gradient is zero: only the prox acts, so W = W0 * prod_c (1 + eta lambda)^-P.
class ShrinkOnly : public api::Model {
 public:
  ShrinkOnly(int64_t J, int64_t D, double lambda) : J_(J), D_(D), lambda_(lambda) {}
  std::string name() const override { return "shrink_only"; }
  int64_t rows() const override { return J_; }
  int64_t cols() const override { return D_; }
  void init(MatrixMap W, Rng&) override { W.setConstant(2.0f); }
  void compute_sf(const api::Weights&, const api::MiniBatch& batch, api::SfWriter& out) override {
    out.write_u_block(Matrix::Zero(batch.size(), J_));
    out.write_v_block(Matrix::Ones(batch.size(), D_));
    out.commit();
  }
  double prox_scale(double step) const override { return 1.0 / (1.0 + step * lambda_); }
  double objective(const api::Weights& W, const io::Dataset&, int64_t) const override { return W.stored.squaredNorm(); }
  double accuracy(const api::Weights&, const io::Dataset&) const override { return -1; }

 private:
  int64_t J_, D_;
  double lambda_;
};

TEST(L2Mlr, ScalingProxMatchesTheClosedFormNorm) {
  Config cfg = base_config();
  cfg.stop.max_clocks = 400;
  cfg.optimizer.lr = 0.3;
  cfg.optimizer.lr_decay = 0.01;
  const double lambda = 0.2;
  const int p = 3;
  std::vector<runtime::WorkerResult> res(p);
  testing::run_ranks(p, [&](comm::Transport& tr) {
    const auto data = io::load_data(cfg.data, cfg.job.seed, tr.rank(), p, tr.rank() == 0);
    ShrinkOnly m(4, 13, lambda);
    runtime::Worker w(cfg, tr, data.train, &data.test, m);
    res[static_cast<size_t>(tr.rank())] = w.run();
  });
  double log_factor = 0;
  for (int64_t c = 0; c < cfg.stop.max_clocks; ++c)
    log_factor -= p * std::log1p(lambda * cfg.optimizer.lr / (1.0 + cfg.optimizer.lr_decay * static_cast<double>(c)));
  const double expected = 2.0 * std::exp(log_factor) * std::sqrt(4.0 * 13.0);
  for (const auto& r : res) EXPECT_NEAR(r.W().norm(), expected, 1e-3 * expected);
}

TEST(L2Mlr, SdcaDualityGapIsNonNegativeAndShrinks) {
  Config cfg = base_config();
  cfg.model.name = "l2mlr";
  cfg.model.solver = "sdca";
  cfg.model.lambda = 0.01;
  cfg.optimizer.minibatch = 2;  // sigma = P * K = 2: a nearly sequential SDCA
  io::Dataset data = io::make_synthetic({200, 8, 3, 1.0, 0.05, 5, 0});
  data.add_bias();
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  auto base = make_model("l2mlr", ctx);
  auto& m = dynamic_cast<L2Mlr&>(*base);
  ASSERT_EQ(m.update_rule(), api::UpdateRule::kAsWritten);
  Matrix W = Matrix::Zero(3, data.dim);
  io::EpochSampler sampler(data.n, 7, 0);
  std::vector<int64_t> rows;
  api::MiniBatch batch;
  std::vector<double> gaps;
  for (int epoch = 0; epoch < 40; ++epoch) {
    for (int64_t c = 0; c < data.n / cfg.optimizer.minibatch; ++c) {
      sampler.next(cfg.optimizer.minibatch, rows);
      api::gather(data, rows, batch);
      W += static_cast<float>(cfg.optimizer.minibatch) * sf_mean(m, W, batch);  // applied as written
    }
    // W = w(alpha) exactly: W is the sum of the dual steps over x_i / (lambda n).
    const Matrix A = m.alpha();
    Matrix w_alpha = A.transpose() * data.dense / static_cast<float>(cfg.model.lambda * data.n);
    ASSERT_LT((w_alpha - W).cwiseAbs().maxCoeff(), 1e-3f);
    // Gap = primal - dual = mean KL(q_i || p_i) >= 0.
    const double primal = m.objective(W, data, 0);
    const double dual = m.mean_dual_entropy(0) - 0.5 * cfg.model.lambda * W.squaredNorm();
    const double gap = m.duality_gap(W, data, 0);
    EXPECT_NEAR(primal - dual, gap, 1e-3 * std::max(1.0, gap));
    EXPECT_GE(gap, -1e-6) << "epoch " << epoch;
    gaps.push_back(gap);
  }
  for (size_t i = 1; i < gaps.size(); ++i) EXPECT_LE(gaps[i], gaps[i - 1] * 1.001 + 1e-7) << "epoch " << i;
  EXPECT_LT(gaps.back(), 0.1 * gaps.front());
}

// The duality gap after `epochs` epochs of SDCA with sdca_sigma `sigma` (0: the default), on sparse
// rows with few shared features (text-like), and the sigma the model used.
std::pair<double, double> sdca_gap(double sigma, int epochs, const io::Dataset& data) {
  Config cfg = base_config();
  cfg.model.name = "l2mlr";
  cfg.model.solver = "sdca";
  cfg.model.lambda = 1e-3;
  cfg.model.layout = "row-major";
  cfg.model.sdca_sigma = sigma;
  cfg.optimizer.minibatch = 32;
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  auto base = make_model("l2mlr", ctx);
  auto& m = dynamic_cast<L2Mlr&>(*base);
  Matrix W = Matrix::Zero(data.classes, data.dim);
  Rng rng = make_rng(1, 2);
  m.init(MatrixMap(W.data(), W.rows(), W.cols()), rng);
  io::EpochSampler sampler(data.n, 7, 0);
  std::vector<int64_t> rows;
  api::MiniBatch batch;
  double last = m.duality_gap(W, data, 0);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (int64_t c = 0; c < data.n / cfg.optimizer.minibatch; ++c) {
      sampler.next(cfg.optimizer.minibatch, rows);
      api::gather(data, rows, batch);
      W += static_cast<float>(cfg.optimizer.minibatch) * sf_mean(m, W, batch);
    }
    const double gap = m.duality_gap(W, data, 0);
    EXPECT_LE(gap, last * 1.001 + 1e-7) << "sigma " << m.sdca_sigma() << ", epoch " << epoch << ": no dual ascent";
    last = gap;
  }
  return {last, m.sdca_sigma()};
}

std::pair<double, double> sparse_sdca_gap(double sigma, int epochs) {
  return sdca_gap(sigma, epochs, io::make_synthetic({640, 2000, 5, 0.01, 0.05, 5, 0}));
}

// Rows like tf-idf documents: every row has the same 20 common words (0.6 of its norm) and 10 of
// its class's 60 words, normalised; 5 classes. Any two rows overlap, two rows of different
// classes only in the common words.
io::Dataset shared_words_data() {
  io::Dataset d;
  d.name = "shared words";
  d.n = 640;
  d.dim = 320;
  d.classes = 5;
  d.dense = Matrix::Zero(d.n, d.dim);
  Rng rng = make_rng(3, 4);
  for (int64_t i = 0; i < d.n; ++i) {
    const auto y = static_cast<int32_t>(i % 5);
    d.labels.push_back(y);
    d.dense.row(i).head(20).setConstant(0.6f / std::sqrt(20.0f));
    for (int k = 0; k < 10; ++k)
      d.dense(i, 20 + y * 60 + static_cast<int64_t>(rng() % 60)) = 0.2f + static_cast<float>(rng() % 1000) / 1250.0f;
    d.dense.row(i) /= d.dense.row(i).norm();
  }
  return d;
}

TEST(L2Mlr, SdcaDefaultDampingFitsRowsThatShareWordsAcrossClasses) {
  // The rows' scalar overlap is large (every pair shares the common words: the scalar bound's
  // sigma^2 is about 0.4, a damping near 0.4 b); what two simultaneous steps share is that overlap
  // times their class directions' (the multiclass bound), small across 5 classes. The default
  // damps far less than the scalar bound and still ascends (the gap never grows: sdca_gap checks).
  const auto data = shared_words_data();
  const auto [fitted, sigma] = sdca_gap(0, 5, data);
  const auto [scalar, b] = sdca_gap(0.4 * 32, 5, data);
  EXPECT_LT(sigma, 0.2 * 32);
  EXPECT_GE(sigma, 1);
  EXPECT_LT(fitted, 0.5 * scalar) << "default sigma " << sigma << ", scalar bound's " << b;
}

TEST(L2Mlr, SdcaDefaultDampingFitsSparseData) {
  // 32 simultaneous steps on nearly orthogonal rows: the data's safe damping is near 1, not 32, and
  // SDCA gets there many times faster (still a dual ascent: the gap never grows).
  const auto [fitted, sigma] = sparse_sdca_gap(0, 5);
  const auto [worst_case, b] = sparse_sdca_gap(32, 5);
  EXPECT_EQ(b, 32);
  EXPECT_LT(sigma, 4);
  EXPECT_GE(sigma, 1);
  EXPECT_LT(fitted, 0.5 * worst_case) << "default sigma " << sigma;
}

TEST(L2Mlr, SdcaReportsTheGapOnlyWhenItsDualsAreTheWsOwn) {
  // --evaluate, --resume and model.init hand the model a W without its duals (alpha = 0): the gap
  // would be the cross-entropy, a number that means nothing there, so the metrics leave it out.
  Config cfg = base_config();
  cfg.model.name = "l2mlr";
  cfg.model.solver = "sdca";
  io::Dataset data = io::make_synthetic({50, 6, 3, 1.0, 0.05, 5, 0});
  data.add_bias();
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  auto m = make_model("l2mlr", ctx);
  Matrix W = Matrix::Constant(3, data.dim, 0.1f);
  const auto names = [&] {
    std::vector<std::string> out;
    for (const auto& [k, v] : m->metrics(api::Weights{W}, data, 0, nullptr)) out.push_back(k);
    return out;
  };
  EXPECT_THAT(names(), ::testing::Not(::testing::Contains("duality_gap")));
  W.setZero();
  Rng rng = make_rng(1, 2);
  m->init(MatrixMap(W.data(), W.rows(), W.cols()), rng);
  EXPECT_THAT(names(), ::testing::Contains("duality_gap"));
}

// ---- DML -------------------------------------------------------------------------------------

class DmlGradient : public ::testing::TestWithParam<double> {};

TEST_P(DmlGradient, SfsMatchFiniteDifferencesOfThePairLoss) {
  Config cfg = base_config();
  cfg.model.name = "dml";
  cfg.model.dim = 3;
  cfg.model.margin = 4.0;
  io::Dataset data = io::make_synthetic({10, 6, 2, GetParam(), 0.0, 3, 0});
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  auto base = make_model("dml", ctx);
  auto& m = dynamic_cast<Dml&>(*base);
  Matrix L = Matrix::Zero(3, data.dim);
  Rng rng = make_rng(1, 2);
  m.init(view(L), rng);
  L *= 1.5f;
  const auto batch = all_rows(data, 5);
  const auto pairs = m.batch_pairs(batch);
  int sim = 0;
  for (const auto& p : pairs) sim += p.similar ? 1 : 0;
  EXPECT_GT(sim, 0);
  EXPECT_LT(sim, static_cast<int>(pairs.size()));
  const Matrix G = sf_mean(m, L, batch);
  const Matrix fd = finite_diff(
      L, [&](const Matrix& X) { return m.pair_loss(X, data, pairs); }, 1e-3f);
  EXPECT_LT((G - fd).cwiseAbs().maxCoeff(), 2e-2f * std::max(1.0f, fd.cwiseAbs().maxCoeff()));
}

INSTANTIATE_TEST_SUITE_P(DenseAndSparse, DmlGradient, ::testing::Values(1.0, 0.5));

TEST(Dml, AucIsOneForAPerfectMetricAndAHalfForAConstantOne) {
  Config cfg = base_config();
  cfg.model.name = "dml";
  cfg.model.dim = 2;
  // Two classes far apart along feature 0, noise elsewhere.
  io::Dataset data;
  data.n = 40;
  data.dim = 3;
  data.classes = 2;
  data.dense.resize(40, 3);
  Rng rng = make_rng(3, 3);
  std::normal_distribution<float> g(0, 0.01f);
  for (int i = 0; i < 40; ++i) {
    data.labels.push_back(i % 2);
    data.dense.row(i) << 10.0f * (i % 2) + g(rng), g(rng), g(rng);
  }
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  auto m = make_model("dml", ctx);
  Matrix L = Matrix::Zero(2, 3);
  L(0, 0) = 1;
  auto auc = [&](const Matrix& W) {
    for (const auto& [k, v] : m->metrics(W, data, 0, &data))
      if (k == "pair_auc") return v;
    return -2.0;
  };
  EXPECT_DOUBLE_EQ(auc(L), 1.0);
  EXPECT_DOUBLE_EQ(m->accuracy(L, data), 1.0);
  EXPECT_DOUBLE_EQ(auc(Matrix::Zero(2, 3)), 0.5);  // all distances tie
}

// ---- Sparse coding ---------------------------------------------------------------------------

TEST(SparseCoding, SfsAreTheReconstructionGradientWithCodesFixed) {
  Config cfg = base_config();
  cfg.model.name = "sparse_coding";
  cfg.model.atoms = 5;
  cfg.model.gamma = 0.05;
  io::Dataset data = io::make_synthetic({7, 6, 2, 1.0, 0.0, 9, 0});
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  auto base = make_model("sparse_coding", ctx);
  auto& m = dynamic_cast<SparseCoding&>(*base);
  EXPECT_EQ(m.rows(), 6);
  EXPECT_EQ(m.cols(), 5);
  Matrix B(6, 5);
  Rng rng = make_rng(4, 4);
  m.init(view(B), rng);
  const auto batch = all_rows(data);
  const Matrix A = m.encode(B, data.dense);
  EXPECT_GT((A.array() != 0).count(), 0);
  const Matrix G = sf_mean(m, B, batch);
  // d/dB of mean 0.5 ||x - B a||^2 with the codes held at their solution (envelope theorem).
  const Matrix fd = finite_diff(
      B, [&](const Matrix& X) { return 0.5 * (data.dense - A * X.transpose()).rowwise().squaredNorm().mean(); }, 1e-2f);
  EXPECT_LT((G - fd).cwiseAbs().maxCoeff(), 2e-3f * std::max(1.0f, fd.cwiseAbs().maxCoeff()));
}

TEST(SparseCoding, LassoCodesSatisfyTheOptimalityConditions) {
  Config cfg = base_config();
  cfg.model.atoms = 8;
  cfg.model.gamma = 0.3;
  cfg.model.lasso_steps = 500;
  io::Dataset data = io::make_synthetic({5, 10, 2, 1.0, 0.0, 2, 0});
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  auto base = make_model("sparse_coding", ctx);
  auto& m = dynamic_cast<SparseCoding&>(*base);
  Matrix B(10, 8);
  Rng rng = make_rng(5, 5);
  m.init(view(B), rng);
  const Matrix A = m.encode(B, data.dense);
  // KKT: g = B^T (x - B a); |g_k| <= gamma where a_k = 0, g_k = gamma * sign(a_k) otherwise.
  const Matrix Gr = (data.dense - A * B.transpose()) * B;
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    for (Eigen::Index k = 0; k < A.cols(); ++k) {
      if (A(i, k) == 0)
        EXPECT_LE(std::abs(Gr(i, k)), 0.3f + 1e-3f);
      else
        EXPECT_NEAR(Gr(i, k), 0.3f * (A(i, k) > 0 ? 1 : -1), 1e-3f);
    }
  }
}

TEST(SparseCoding, ProxProjectsColumnsOntoTheUnitBall) {
  Config cfg = base_config();
  io::Dataset data = io::make_synthetic({5, 4, 2, 1.0, 0.0, 2, 0});
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  auto m = make_model("sparse_coding", ctx);
  Matrix B(4, 3);
  B << 3, 0.1f, 0, 4, 0.1f, 0, 0, 0.1f, 0, 0, 0.1f, 1;
  m->prox(view(B), 0.1);
  EXPECT_NEAR(B.col(0).norm(), 1.0f, 1e-6f);
  EXPECT_NEAR(B(0, 0), 0.6f, 1e-6f);
  EXPECT_NEAR(B.col(1).norm(), 0.2f, 1e-6f);  // inside the ball: unchanged
  EXPECT_NEAR(B.col(2).norm(), 1.0f, 1e-6f);
}

// ---- Training through the runtime ------------------------------------------------------------

struct ModelCase {
  std::string name;
  std::function<void(Config&)> setup;
};

class ModelTraining : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelTraining, OneRankDecreasesTheObjective) {
  Config cfg = base_config();
  GetParam().setup(cfg);
  cfg.stop.max_clocks = 200;
  const auto res = train(1, cfg).results;
  const auto& ev = res[0].evals;
  ASSERT_GE(ev.size(), 3u);
  EXPECT_LT(ev.back().objective, 0.9 * ev.front().objective) << GetParam().name;
}

TEST_P(ModelTraining, FourBspRanksStayBitwiseIdentical) {
  Config cfg = base_config();
  GetParam().setup(cfg);
  cfg.stop.max_clocks = 60;
  const auto t = train(4, cfg);
  for (int r = 1; r < 4; ++r) {
    ASSERT_EQ(t.checksums[static_cast<size_t>(r)], t.checksums[0]) << GetParam().name << " rank " << r;
    EXPECT_EQ(t.results[static_cast<size_t>(r)].self.checksum, t.results[0].self.checksum);
  }
  EXPECT_EQ(t.checksums[0].size(), 60u);
  // And it trains: the objective at the last evaluation is below the starting point's.
  const auto& ev = t.results[0].evals;
  ASSERT_GE(ev.size(), 2u);
  EXPECT_LT(ev.back().objective, ev.front().objective) << GetParam().name;
  if (GetParam().name == "sparse_coding") {
    for (Eigen::Index c = 0; c < t.results[0].W().cols(); ++c) EXPECT_LE(t.results[0].W().col(c).norm(), 1.0f + 1e-5f);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelTraining,
                         ::testing::Values(ModelCase{"l2mlr_sgd",
                                                     [](Config& c) {
                                                       c.model.name = "l2mlr";
                                                       c.model.lambda = 0.01;
                                                     }},
                                           ModelCase{"l2mlr_sdca",
                                                     [](Config& c) {
                                                       c.model.name = "l2mlr";
                                                       c.model.solver = "sdca";
                                                       c.model.lambda = 0.01;
                                                     }},
                                           ModelCase{"dml",
                                                     [](Config& c) {
                                                       c.model.name = "dml";
                                                       c.model.dim = 4;
                                                       c.model.margin = 20.0;
                                                       c.optimizer.lr = 0.002;
                                                       c.model.eval_pairs = 400;
                                                     }},
                                           ModelCase{"sparse_coding",
                                                     [](Config& c) {
                                                       c.model.name = "sparse_coding";
                                                       c.model.atoms = 8;
                                                       c.model.gamma = 0.1;
                                                       c.data.bias = false;
                                                       c.optimizer.lr = 0.05;
                                                     }}),
                         [](const ::testing::TestParamInfo<ModelCase>& i) { return i.param.name; });

// ---- Model parameters and plugins -------------------------------------------------------------

TEST(ModelParams, UnreadPluginParamsAndWrongTypesAreErrors) {
  Config cfg = parse_config(
      "[data]\nformat = \"synthetic\"\nfeatures = 4\nclasses = 2\n[model]\nname = \"mlr\"\n"
      "[model.params]\ntemprature = 2.0\n",
      "job.toml");
  io::Dataset data = io::make_synthetic({5, 4, 2, 1.0, 0.0, 2, 0});
  try {
    make_model(cfg, data, data.n, 0, 1);
    FAIL() << "an unread model.params key was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("job.toml:8: unknown key model.params.temprature"));
  }
  ConfigModelContext ctx(cfg, data, data.n, 0, 1);
  EXPECT_DOUBLE_EQ(ctx.param_double("temprature", 1.0), 2.0);
  EXPECT_THROW(ctx.param_string("temprature", "x"), InvalidArgument);
  EXPECT_THROW(ctx.param_int("temprature", 1), InvalidArgument);
  EXPECT_EQ(ctx.param_int("missing", 7), 7);
  // Built-in keys read through the same interface.
  EXPECT_DOUBLE_EQ(ctx.param_double("lambda", 0), cfg.model.lambda);
  EXPECT_EQ(ctx.param_string("solver", ""), "sgd");
}

TEST(Plugins, MissingFileWrongAbiAndMissingSymbolAreRefusedNamingTheFile) {
  Config cfg = base_config();
  io::Dataset data = io::make_synthetic({5, 4, 2, 1.0, 0.0, 2, 0});
  auto error_of = [&](const std::string& path) {
    cfg.model.plugin = path;
    try {
      make_model(cfg, data, data.n, 0, 1);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_of("/nonexistent/libnope.so"), HasSubstr("no such file: /nonexistent/libnope.so"));
  EXPECT_THAT(error_of(SFB_BAD_ABI_PLUGIN),
              HasSubstr(std::string(SFB_BAD_ABI_PLUGIN) + " was built for plugin ABI version 999"));
  EXPECT_THAT(error_of(SFB_NO_SYMBOL_PLUGIN),
              HasSubstr(std::string(SFB_NO_SYMBOL_PLUGIN) + " does not export sfb_plugin_abi_version()"));
  // A file that is not a shared library at all.
  EXPECT_THAT(error_of(std::string(SFB_SOURCE_DIR) + "/README.md"), HasSubstr("cannot load"));
}

TEST(Plugins, WhatAPluginThrowsOrReturnsWrongBecomesAnSfbErrorNamingIt) {
  Config cfg = base_config();
  cfg.model.plugin = SFB_HOSTILE_PLUGIN;
  const io::Dataset data = io::make_synthetic({20, 4, 2, 1.0, 0.0, 2, 0});
  auto make = [&](const std::string& fault) {
    cfg.model.params = {{"fault", "\"" + fault + "\"", "string", "test"}};
    return make_model(cfg, data, data.n, 0, 1);
  };
  // A plugin's own config error is bad input (exit code 2), named with the plugin.
  EXPECT_THAT([&] { make("config_error"); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  HasSubstr(std::string(SFB_HOSTILE_PLUGIN) + ": fault = \"config_error\" is not a setting")));
  auto model = make("throw_int");
  api::BatchSfWriter writer(2, 4, [](SfBatchPtr) {});
  api::MiniBatch batch;
  batch.x = Matrix::Zero(3, 4);
  batch.labels = {0, 1, 0};
  writer.begin(0, 0, 3, 1.0f, false);
  const Matrix W = Matrix::Zero(2, 4);
  EXPECT_THAT(
      [&] { model->compute_sf({W}, batch, writer); },
      ::testing::ThrowsMessage<Error>(HasSubstr("compute_sf() threw an exception that is not a std::exception")));
  auto model2 = make("throw_std");
  EXPECT_THAT([&] { model2->compute_sf({W}, batch, writer); },
              ::testing::ThrowsMessage<Error>(HasSubstr("compute_sf() threw: out of ideas")));
  Matrix init = Matrix::Zero(2, 4);
  Rng rng = make_rng(1, 1);
  EXPECT_THAT([&] { make("nan_init")->init(view(init), rng); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("init() left non-finite values in W")));
  EXPECT_THAT([&] { make("bad_scale")->prox_scale(0.1); },
              ::testing::ThrowsMessage<Error>(HasSubstr("prox_scale(0.1) returned 0, not a finite positive factor")));
}

TEST(Plugins, ADenseOnlyPluginOnSparseDataIsRefusedNamingTheFix) {
  Config cfg = base_config();
  cfg.data.format = sfb::DataFormat::kSynthetic;
  cfg.model.plugin = SFB_HOSTILE_PLUGIN;  // reads batch.x only: reads_sparse_rows() is false
  const io::Dataset sparse = io::make_synthetic({20, 8, 2, 0.5, 0.0, 2, 0});
  ASSERT_TRUE(sparse.sparse);
  EXPECT_THAT([&] { make_model(cfg, sparse, sparse.n, 0, 1); },
              ::testing::ThrowsMessage<InvalidArgument>(::testing::AllOf(
                  HasSubstr("reads dense rows only"), HasSubstr(SFB_HOSTILE_PLUGIN),
                  HasSubstr("data.format = \"synthetic\" gives sparse rows"), HasSubstr("reads_sparse_rows()"))));
  const io::Dataset dense = io::make_synthetic({20, 8, 2, 1.0, 0.0, 2, 0});
  EXPECT_NO_THROW(make_model(cfg, dense, dense.n, 0, 1));
  cfg.model.plugin = SFB_EXAMPLE_PLUGIN;  // handles CSR rows and says so
  EXPECT_NO_THROW(make_model(cfg, sparse, sparse.n, 0, 1));
}

TEST(Plugins, TheWriterSaysWhichSparseVDeclarationToChange) {
  api::BatchSfWriter writer(2, 4, [](SfBatchPtr) {});
  writer.begin(0, 0, 1, 1.0f, false);
  const std::vector<int32_t> idx{1};
  const std::vector<float> val{1.0f};
  EXPECT_THAT([&] { writer.write_v(0, idx, val); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("return true from sparse_v()")));
  api::BatchSfWriter sparse_writer(2, 4, [](SfBatchPtr) {});
  sparse_writer.begin(0, 0, 1, 1.0f, true);
  const std::vector<float> v(4, 1.0f);
  EXPECT_THAT([&] { sparse_writer.write_v(0, v); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("return false from sparse_v()")));
}

TEST(Plugins, WeightsHelpersApplyTheScale) {
  const Matrix stored = Matrix::Constant(2, 3, 2.0f);
  const api::Weights W{stored, 0.5f};
  const Matrix m = W.matrix();
  EXPECT_EQ(m(1, 2), 1.0f);
  EXPECT_EQ(W.row(1)(0), 1.0f);
  EXPECT_EQ(W(0, 0), 1.0f);
}

TEST(Gradcheck, EveryBuiltInGradientModelsSfsAreItsGradientOnDenseAndSparseData) {
  for (const double density : {1.0, 0.3}) {
    const io::Dataset data = io::make_synthetic({60, 16, 4, density, 0.0, 3, 0});
    // mlr and l2mlr in both layouts of W (auto is feature-major on the sparse data).
    for (const std::string name : {"mlr", "l2mlr", "dml", "sparse_coding", "mlr:row-major", "mlr:feature-major",
                                   "l2mlr:row-major", "l2mlr:feature-major"}) {
      Config cfg = base_config();
      cfg.model.name = name.substr(0, name.find(':'));
      if (name.find(':') != std::string::npos) cfg.model.layout = name.substr(name.find(':') + 1);
      cfg.model.lambda = 0.1;  // l2mlr: a regulariser gradient large enough to matter
      cfg.model.dim = 5;
      cfg.model.atoms = 6;
      // Sparse coding's SFs are its gradient at the lasso codes' optimum (the codes' own change with
      // B drops out there): enough FISTA steps that the 30-step default's residue (2.1% on one CPU's
      // kernels, at the 2% tolerance) does not decide the check.
      cfg.model.lasso_steps = 200;
      auto model = make_model(cfg, data, data.n, 0, 1);
      const bool feature_major =
          cfg.model.layout == "feature-major" ||
          (cfg.model.layout == "auto" && data.sparse && cfg.model.name.find("mlr") != std::string::npos);
      EXPECT_EQ(model->layout(), feature_major ? Layout::kFeatureMajor : Layout::kRowMajor) << name;
      const auto r = gradcheck(*model, data, {});
      EXPECT_TRUE(r.passed) << name << " density " << density << ": worst error " << r.worst_error;
      EXPECT_GT(r.gradient_norm, 0.0) << name;
      if (cfg.model.name == "l2mlr") EXPECT_GT(r.regulariser_norm, 0.0);
    }
  }
}

// Forwards to a model but multiplies its u by `factor`: a gradient 100 (factor - 1) % off.
class ScaledU final : public api::Model {
  class Writer final : public api::SfWriter {
   public:
    Writer(api::SfWriter& out, float f) : out_(out), f_(f) {}
    int32_t count() const override { return out_.count(); }
    int32_t J() const override { return out_.J(); }
    int32_t D() const override { return out_.D(); }
    void write_u(int32_t i, std::span<const float> u) override {
      std::vector<float> s(u.begin(), u.end());
      for (auto& x : s) x *= f_;
      out_.write_u(i, s);
    }
    void write_v(int32_t i, std::span<const float> v) override { out_.write_v(i, v); }
    void write_v(int32_t i, std::span<const int32_t> idx, std::span<const float> val) override {
      out_.write_v(i, idx, val);
    }
    void write_u_block(const Matrix& u) override { out_.write_u_block(f_ * u); }
    void write_v_block(const Matrix& v) override { out_.write_v_block(v); }
    void commit() override { out_.commit(); }

   private:
    api::SfWriter& out_;
    float f_;
  };

 public:
  ScaledU(ModelPtr inner, float factor) : inner_(std::move(inner)), factor_(factor) {}
  std::string name() const override { return "scaled " + inner_->name(); }
  int64_t rows() const override { return inner_->rows(); }
  int64_t cols() const override { return inner_->cols(); }
  bool reads_sparse_rows() const override { return true; }
  bool sparse_v() const override { return inner_->sparse_v(); }
  void compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) override {
    Writer w(out, factor_);
    inner_->compute_sf(W, batch, w);
  }
  double objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const override {
    return inner_->objective(W, data, limit);
  }
  double accuracy(const api::Weights& W, const io::Dataset& data) const override { return inner_->accuracy(W, data); }

 private:
  ModelPtr inner_;
  float factor_;
};

TEST(Gradcheck, AGradientTenPercentOffFailsAtEveryStep) {
  for (const double density : {1.0, 0.3}) {
    const io::Dataset data = io::make_synthetic({60, 16, 4, density, 0.0, 3, 0});
    Config cfg = base_config();
    ScaledU right(make_model(cfg, data, data.n, 0, 1), 1.0f);
    EXPECT_TRUE(gradcheck(right, data, {}).passed);
    ScaledU wrong(make_model(cfg, data, data.n, 0, 1), 1.1f);
    const auto r = gradcheck(wrong, data, {});
    EXPECT_FALSE(r.passed) << "density " << density;
    EXPECT_GT(r.worst_error, 0.05);
  }
}

// Forwards to a model but hands it W.stored as if it were W: the plugin bug of ignoring W.scale,
// invisible at scale 1.
class ReadsStoredOnly final : public api::Model {
 public:
  explicit ReadsStoredOnly(ModelPtr inner) : inner_(std::move(inner)) {}
  std::string name() const override { return "stored-only " + inner_->name(); }
  int64_t rows() const override { return inner_->rows(); }
  int64_t cols() const override { return inner_->cols(); }
  bool reads_sparse_rows() const override { return true; }
  bool sparse_v() const override { return inner_->sparse_v(); }
  Layout layout() const override { return inner_->layout(); }
  double prox_scale(double t) const override { return inner_->prox_scale(t); }
  void compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) override {
    inner_->compute_sf(api::Weights{W.stored, 1.0f, W.layout}, batch, out);
  }
  double objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const override {
    return inner_->objective(W, data, limit);
  }
  double accuracy(const api::Weights& W, const io::Dataset& data) const override { return inner_->accuracy(W, data); }

 private:
  ModelPtr inner_;
};

TEST(Gradcheck, AModelThatIgnoresWScaleFailsThoughItPassesAtScaleOne) {
  const io::Dataset data = io::make_synthetic({60, 16, 4, 1.0, 0.0, 3, 0});
  Config cfg = base_config();
  cfg.model.name = "l2mlr";
  cfg.model.lambda = 0.01;
  const auto honest = gradcheck(*make_model(cfg, data, data.n, 0, 1), data, {});
  EXPECT_TRUE(honest.passed);
  EXPECT_GE(honest.scale_error, 0.0);
  EXPECT_LT(honest.scale_error, 1e-6);
  ReadsStoredOnly wrong(make_model(cfg, data, data.n, 0, 1));
  const auto r = gradcheck(wrong, data, {});
  EXPECT_LT(r.worst_error, 0.02) << "at scale 1 the bug is invisible";
  EXPECT_FALSE(r.passed);
  EXPECT_GT(r.scale_error, 0.02);
}

TEST(Gradcheck, APluginIsCheckedAndWrongGradientsAndDualModelsAreCaught) {
  const io::Dataset data = io::make_synthetic({60, 16, 4, 1.0, 0.0, 3, 0});
  Config cfg = base_config();
  cfg.model.plugin = SFB_EXAMPLE_PLUGIN;
  cfg.model.params.push_back({"label_smoothing", "0.1", "float", "test"});
  EXPECT_TRUE(gradcheck(*make_model(cfg, data, data.n, 0, 1), data, {}).passed);
  // The hostile plugin writes softmax SFs but reports a constant objective: they cannot agree.
  cfg.model.plugin = SFB_HOSTILE_PLUGIN;
  cfg.model.params.clear();
  const auto r = gradcheck(*make_model(cfg, data, data.n, 0, 1), data, {});
  EXPECT_FALSE(r.passed);
  EXPECT_GT(r.worst_error, 0.5);
  cfg = base_config();
  cfg.model.name = "l2mlr";
  cfg.model.solver = "sdca";
  EXPECT_THAT([&] { gradcheck(*make_model(cfg, data, data.n, 0, 1), data, {}); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("its SFs are not a gradient")));
}

TEST(Plugins, TheExamplePluginLoadsTrainsAndReadsItsParams) {
  Config cfg = base_config();
  cfg.model.plugin = SFB_EXAMPLE_PLUGIN;
  cfg.model.params.push_back({"label_smoothing", "0.1", "float", "test"});
  cfg.stop.max_clocks = 100;
  const auto t = train(2, cfg);
  EXPECT_EQ(t.checksums[0], t.checksums[1]);
  const auto& ev = t.results[0].evals;
  ASSERT_GE(ev.size(), 2u);
  EXPECT_LT(ev.back().objective, ev.front().objective);
  EXPECT_GT(ev.back().accuracy, 0.5);
}

}  // namespace
}  // namespace sfb::models
