// MG-WFBP training mode: every layer's backward against finite differences, data parallelism
// against one rank with the whole batch, bitwise-equal weights under every planner (docs/design.md
// invariant 6), and no all-reduce before its group is ready.
#include <atomic>
#include <cmath>
#include <optional>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/cnn/executor.h"
#include "sfb/cnn/network.h"
#include "sfb/core/error.h"
#include "testing/configs.h"
#include "testing/files.h"
#include "testing/rank_threads.h"

namespace sfb::cnn {
namespace {

using mgwfbp::describe;
using mgwfbp::Group;
using mgwfbp::Plan;
using mgwfbp::plan_synceasgd;
using mgwfbp::plan_wfbp;
using mgwfbp::Profile;
using ::testing::HasSubstr;

io::Dataset random_images(int n, Shape shape, int classes, uint64_t seed) {
  io::Dataset d;
  d.n = n;
  d.dim = shape.size();
  d.classes = classes;
  d.dense.resize(n, d.dim);
  Rng rng = make_rng(seed, 1);
  std::uniform_real_distribution<float> u(0, 1);
  for (Eigen::Index i = 0; i < d.dense.size(); ++i) d.dense.data()[i] = u(rng);
  for (int i = 0; i < n; ++i) d.labels.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(classes)));
  return d;
}

class LayerGradients : public ::testing::TestWithParam<std::tuple<std::string, Kernels>> {};

TEST_P(LayerGradients, BackwardMatchesFiniteDifferences) {
  const Shape in{2, 6, 6};
  Network net(std::get<0>(GetParam()), in, std::get<1>(GetParam()));
  Rng rng = make_rng(3, 3);
  net.init(rng);
  const io::Dataset d = random_images(3, in, 4, 5);
  const Matrix x = d.dense;
  // Analytic gradients, and the input gradient through a first-layer trick: d loss / d x is checked
  // via the parameters of every layer below, so here only parameters are compared.
  net.forward(x);
  net.backward(d.labels, {});
  for (int p = 0; p < net.param_layers(); ++p) {
    auto& layer = net.param_layer(p);
    const auto ps = layer.params();
    const auto gs = layer.grads();
    for (size_t k = 0; k < ps.size(); ++k) {
      const Matrix g = *gs[k];
      for (Eigen::Index i = 0; i < ps[k]->size(); i += std::max<Eigen::Index>(1, ps[k]->size() / 40)) {
        const float keep = ps[k]->data()[i];
        const float eps = 2e-3f;
        ps[k]->data()[i] = keep + eps;
        const double lp = softmax_cross_entropy(net.forward(x), d.labels, nullptr);
        ps[k]->data()[i] = keep - eps;
        const double lm = softmax_cross_entropy(net.forward(x), d.labels, nullptr);
        ps[k]->data()[i] = keep;
        const double fd = (lp - lm) / (2.0 * eps);
        EXPECT_NEAR(g.data()[i], fd, 3e-3 + 2e-2 * std::abs(fd)) << layer.name() << " param " << k << " entry " << i;
      }
    }
  }
}

std::string kernels_name(Kernels k) { return k == Kernels::kOneDnn ? "onednn" : "reference"; }

// The odd input sizes make pooling crop (7 / 2) and the convolutions pad unevenly placed maxima.
INSTANTIATE_TEST_SUITE_P(Networks, LayerGradients,
                         ::testing::Combine(::testing::Values("fc:4", "fc:5,relu,fc:4", "conv:3:3:1,relu,pool:2,fc:4",
                                                              "conv:3:3,pool:2,conv:2:2:1,relu,fc:4",
                                                              "conv:17:3:2,relu,pool:3,fc:4"),
                                            ::testing::Values(Kernels::kOneDnn, Kernels::kReference)),
                         [](const auto& info) {
                           return "net" + std::to_string(info.index / 2) + "_" + kernels_name(std::get<1>(info.param));
                         });

class InputGradient : public ::testing::TestWithParam<Kernels> {};

TEST_P(InputGradient, OfConvAndPoolMatchesFiniteDifferences) {
  // A first fc layer sees the input gradient of the layers above it as its own dx: compare a
  // conv + pool stack's dx with finite differences of the loss in x.
  const Shape in{1, 5, 5};
  Network net("conv:2:3:1,relu,pool:2,fc:3", in, GetParam());
  Rng rng = make_rng(4, 4);
  net.init(rng);
  const io::Dataset d = random_images(2, in, 3, 6);
  Matrix x = d.dense;
  // dx of the whole network by the chain rule through layer 0: run layer by layer.
  std::vector<Matrix> acts(static_cast<size_t>(net.layers()) + 1);
  acts[0] = x;
  for (int i = 0; i < net.layers(); ++i)
    net.layer(i).forward(acts[static_cast<size_t>(i)], acts[static_cast<size_t>(i) + 1]);
  Matrix g;
  softmax_cross_entropy(acts.back(), d.labels, &g);
  for (int i = net.layers() - 1; i >= 0; --i) {
    Matrix dx;
    net.layer(i).backward(acts[static_cast<size_t>(i)], acts[static_cast<size_t>(i) + 1], g, &dx);
    g = dx;
  }
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const float keep = x.data()[i];
    x.data()[i] = keep + 1e-2f;
    const double lp = softmax_cross_entropy(net.forward(x), d.labels, nullptr);
    x.data()[i] = keep - 1e-2f;
    const double lm = softmax_cross_entropy(net.forward(x), d.labels, nullptr);
    x.data()[i] = keep;
    EXPECT_NEAR(g.data()[i], (lp - lm) / 2e-2, 3e-3) << "x entry " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, InputGradient, ::testing::Values(Kernels::kOneDnn, Kernels::kReference),
                         [](const auto& info) { return kernels_name(info.param); });

// The oneDNN layers (blocked layouts, their own summation order) against the reference ones on a
// network of the default's shape, layer by layer on the same inputs and output gradients (through
// the whole network, a pre-activation within rounding of 0 may take either side of a ReLU): the
// same outputs, input gradients and parameter gradients up to float rounding, for two batch
// sizes (the primitives are rebuilt for the second).
TEST(OneDnnLayers, MatchTheReferenceLayers) {
  const Shape in{1, 12, 12};
  const std::string spec = "conv:16:5:2,relu,pool:2,conv:32:5:2,relu,pool:2,fc:24,relu,fc:10";
  Network fast(spec, in, Kernels::kOneDnn), ref(spec, in, Kernels::kReference);
  Rng r1 = make_rng(9, 9), r2 = make_rng(9, 9);
  fast.init(r1);
  ref.init(r2);
  const auto rel = [](const Matrix& a, const Matrix& b) {
    return (a - b).cwiseAbs().maxCoeff() / std::max(1e-3f, b.cwiseAbs().maxCoeff());
  };
  for (int n : {7, 32}) {
    const io::Dataset d = random_images(n, in, 10, 40 + static_cast<uint64_t>(n));
    std::vector<Matrix> acts(static_cast<size_t>(ref.layers()) + 1);
    acts[0] = d.dense;
    for (int i = 0; i < ref.layers(); ++i) {
      Matrix y;
      fast.layer(i).forward(acts[static_cast<size_t>(i)], y);
      ref.layer(i).forward(acts[static_cast<size_t>(i)], acts[static_cast<size_t>(i) + 1]);
      EXPECT_LT(rel(y, acts[static_cast<size_t>(i) + 1]), 1e-5f) << ref.layer(i).name() << " forward, n = " << n;
    }
    Matrix g;
    softmax_cross_entropy(acts.back(), d.labels, &g);
    for (int i = ref.layers() - 1; i >= 0; --i) {
      const auto u = static_cast<size_t>(i);
      Matrix dx_fast, dx_ref;
      fast.layer(i).backward(acts[u], acts[u + 1], g, &dx_fast);
      ref.layer(i).backward(acts[u], acts[u + 1], g, &dx_ref);
      EXPECT_LT(rel(dx_fast, dx_ref), 1e-5f) << ref.layer(i).name() << " input gradient, n = " << n;
      const auto gf = fast.layer(i).grads(), gr = ref.layer(i).grads();
      for (size_t k = 0; k < gf.size(); ++k)
        EXPECT_LT(rel(*gf[k], *gr[k]), 1e-5f) << ref.layer(i).name() << " gradient " << k << ", n = " << n;
      g = dx_ref;
    }
  }
}

Config cnn_config() {
  Config c = testing::quiet_cnn("conv:4:3:1,relu,pool:2,conv:4:3:1,relu,fc:16,relu,fc:3", 4, 6);
  c.optimizer.lr = 0.05;
  return c;
}

std::vector<ExecutorResult> train(int P, const Config& cfg, const io::Dataset& data, ExecutorHooks hooks) {
  std::vector<ExecutorResult> out(static_cast<size_t>(P));
  testing::run_ranks(P, [&](comm::Transport& t) {
    Executor ex(cfg, t, data, nullptr, hooks);
    out[static_cast<size_t>(t.rank())] = ex.run();
  });
  return out;
}

TEST(Executor, FourRanksEqualOneRankWithTheFourTimesBatch) {
  const io::Dataset data = random_images(200, {1, 8, 8}, 3, 11);
  Config cfg = cnn_config();
  const int B = 4, P = 4;
  const Plan wfbp = plan_wfbp(Profile{"t", std::vector<mgwfbp::LayerTiming>(4), 0});
  ExecutorHooks many;
  many.plan = &wfbp;
  const auto par = [&] {
    std::vector<ExecutorResult> out(P);
    testing::run_ranks(P, [&](comm::Transport& t) {
      ExecutorHooks h = many;
      const int r = t.rank();
      h.batch = [r, B, P](int64_t it, std::vector<int64_t>& rows) {
        rows.clear();
        for (int i = 0; i < B; ++i) rows.push_back((it * P * B + r * B + i) % 200);
      };
      Executor ex(cfg, t, data, nullptr, h);
      out[static_cast<size_t>(r)] = ex.run();
    });
    return out;
  }();
  Config one = cfg;
  one.optimizer.minibatch = B * P;
  ExecutorHooks h1 = many;
  h1.batch = [B, P](int64_t it, std::vector<int64_t>& rows) {
    rows.clear();
    for (int i = 0; i < B * P; ++i) rows.push_back((it * P * B + i) % 200);
  };
  const auto single = train(1, one, data, h1);
  ASSERT_EQ(par[0].params.size(), single[0].params.size());
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < par[0].params.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::abs(par[0].params[i] - single[0].params[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::abs(single[0].params[i])));
  }
  EXPECT_LT(max_diff, 1e-4 * std::max(1.0, max_abs));
  for (const auto& r : par) EXPECT_EQ(r.checksum, par[0].checksum);
}

TEST(Executor, EveryPlannerGivesBitwiseTheSameWeights) {
  const io::Dataset data = random_images(120, {1, 8, 8}, 3, 12);
  const Config cfg = cnn_config();
  const Profile shape{"t", std::vector<mgwfbp::LayerTiming>(4), 0};
  std::vector<Plan> plans = {plan_wfbp(shape), plan_synceasgd(shape), Plan{{2, 3}, {0, 1}},
                             Plan{{3, 3}, {1, 2}, {0, 0}}};
  std::vector<uint64_t> sums;
  for (const auto& plan : plans) {
    ExecutorHooks h;
    h.plan = &plan;
    const auto res = train(3, cfg, data, h);
    for (const auto& r : res) EXPECT_EQ(r.checksum, res[0].checksum) << describe(plan);
    sums.push_back(res[0].checksum);
  }
  for (size_t i = 1; i < sums.size(); ++i) EXPECT_EQ(sums[i], sums[0]) << describe(plans[i]);
  // And the profiled run (mgwfbp planner on live measurements) too.
  const auto live = train(3, cfg, data, {});
  EXPECT_EQ(live[0].checksum, sums[0]) << "live plan " << describe(live[0].plan);
}

// The hybrid transport: fully connected layers sent as sufficient factors and rebuilt on every
// rank give the dense all-reduce's weights (float tolerance) on 1, 2 and 4 ranks, every replica
// bitwise the same, and far fewer bytes for a wide layer.
TEST(Executor, FactorGroupsGiveTheDenseGradientsOnOneTwoAndFourRanks) {
  const io::Dataset data = random_images(160, {1, 8, 8}, 3, 14);
  Config cfg = testing::quiet_cnn("conv:4:3:1,relu,pool:2,fc:256,relu,fc:64,relu,fc:3", 4, 5);
  cfg.optimizer.lr = 0.05;
  const Plan dense{{3, 3}, {2, 2}, {1, 1}, {0, 0}};
  const std::vector<Plan> hybrids = {Plan{{3, 3, true}, {2, 2, true}, {1, 1, true}, {0, 0}}, Plan{{1, 3, true}, {0, 0}},
                                     Plan{{2, 3, true}, {0, 1}}};
  for (int P : {1, 2, 4}) {
    ExecutorHooks h;
    h.plan = &dense;
    const auto want = train(P, cfg, data, h);
    for (const auto& plan : hybrids) {
      h.plan = &plan;
      const auto got = train(P, cfg, data, h);
      for (const auto& r : got) EXPECT_EQ(r.checksum, got[0].checksum) << P << " ranks, " << describe(plan);
      double max_diff = 0, max_abs = 0;
      for (size_t i = 0; i < want[0].params.size(); ++i) {
        max_diff = std::max(max_diff, static_cast<double>(std::abs(got[0].params[i] - want[0].params[i])));
        max_abs = std::max(max_abs, static_cast<double>(std::abs(want[0].params[i])));
      }
      EXPECT_LT(max_diff, 1e-5 * std::max(1.0, max_abs)) << P << " ranks, " << describe(plan);
      const bool wide_as_factors =
          std::any_of(plan.begin(), plan.end(), [](const Group& g) { return g.sf && g.lo <= 1; });
      if (P == 1 || !wide_as_factors) continue;
      // fc:256 of 64 inputs at 4 samples per rank: 4 (256 + 64) factor floats against 256 x 65 dense.
      const int64_t got_bytes = got[0].iterations.back().bytes_sent, want_bytes = want[0].iterations.back().bytes_sent;
      EXPECT_LT(got_bytes, want_bytes / 2) << P << " ranks, " << describe(plan);
    }
  }
}

// Counts the all-reduce messages a rank sends (an instrumented transport around the in-process one).
class CountingTransport : public comm::Transport {
 public:
  explicit CountingTransport(std::unique_ptr<comm::Transport> inner) : inner_(std::move(inner)) {
    init_counters(inner_->size());
  }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void barrier() override { inner_->barrier(); }
  std::atomic<int64_t> reduce_sends{0};

 protected:
  void do_send(int dst, comm::Tag tag, comm::SharedBytes data) override {
    if (tag == comm::kTagReduce) ++reduce_sends;
    inner_->send_shared(dst, tag, std::move(data));
  }
  std::optional<comm::Message> poll() override { return inner_->try_recv(); }

 private:
  std::unique_ptr<comm::Transport> inner_;
};

TEST(Executor, NoGroupIsAllReducedBeforeAllItsLayersAreReady) {
  const io::Dataset data = random_images(120, {1, 8, 8}, 3, 13);
  const Config cfg = cnn_config();
  const Plan plan{{3, 3}, {1, 2}, {0, 0}};
  std::atomic<int> calls{0}, violations{0};
  ExecutorHooks h;
  h.plan = &plan;
  h.on_allreduce = [&](int64_t, int, const Group& g, const std::vector<char>& ready) {
    ++calls;
    for (int p = g.lo; p <= g.hi; ++p)
      if (!ready[static_cast<size_t>(p)]) ++violations;
  };
  const int P = 3;
  auto group = comm::make_inproc_group(P);
  std::vector<std::unique_ptr<CountingTransport>> counted;
  for (auto& g : group) counted.push_back(std::make_unique<CountingTransport>(std::move(g)));
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r)
    threads.emplace_back([&, r] {
      Executor ex(cfg, *counted[static_cast<size_t>(r)], data, nullptr, h);
      ex.run();
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(calls.load(), P * cfg.stop.max_clocks * static_cast<int>(plan.size()));
  // Exactly one all-reduce per group and iteration on the wire: these groups are small, so the
  // all-reduce takes its direct algorithm, P - 1 sends per rank each.
  for (const auto& c : counted)
    EXPECT_EQ(c->reduce_sends.load(), cfg.stop.max_clocks * static_cast<int64_t>(plan.size()) * (P - 1));
}

std::string spec_error(const std::string& spec, Shape in) {
  return testing::error_of<InvalidArgument>([&] { Network(spec, in); });
}

TEST(Network, LayerNumbersAreBoundedBeforeAnyLayerComputesWithThem) {
  // pool:0 divided by zero (SIGFPE); a pad of 2^31 - 1 overflowed an int and trained anyway.
  EXPECT_THAT(spec_error("pool:0,fc:10", {1, 8, 8}), HasSubstr("\"pool:0\": pool size must be in [1, 1024], got 0"));
  EXPECT_THAT(spec_error("conv:4:3:2147483647,fc:2", {1, 8, 8}), HasSubstr("pad must be in [0, 1024]"));
  EXPECT_THAT(spec_error("conv:4:3:99999999999,fc:2", {1, 8, 8}), HasSubstr("is not a non-negative integer"));
  EXPECT_THAT(spec_error("fc:0", {1, 8, 8}), HasSubstr("outputs must be in [1, 16777216]"));
  EXPECT_THAT(spec_error("conv:60000:1,fc:2", {1, 100, 100}), HasSubstr("values per sample (more than 2^28)"));
  EXPECT_THAT(spec_error("fc:16000000", {1, 100, 100}), HasSubstr("parameters (more than 2^31)"));
}

TEST(Network, BadSpecsAreRejectedNamingTheLayer) {
  EXPECT_THAT(
      [] {
        Network("conv:4:3,sigmoid,fc:2", {1, 8, 8});
      },
      ::testing::ThrowsMessage<InvalidArgument>(::testing::HasSubstr("unknown layer \"sigmoid\"")));
  EXPECT_THAT(
      [] {
        Network("conv:4:x", {1, 8, 8});
      },
      ::testing::ThrowsMessage<InvalidArgument>(::testing::HasSubstr("\"x\" is not a non-negative integer")));
  EXPECT_THAT(
      [] {
        Network("conv:4:9", {1, 8, 8});
      },
      ::testing::ThrowsMessage<InvalidArgument>(::testing::HasSubstr("does not fit")));
  // Empty items anywhere (they once reached an index into an empty vector: SIGSEGV).
  for (const char* spec : {"conv:4:3,,fc:2", ",fc:2", "fc:2,", "fc:2, ,fc:2", " ", ",", ":"})
    EXPECT_THAT([spec] { Network(spec, {1, 8, 8}); }, ::testing::Throws<InvalidArgument>()) << spec;
}

}  // namespace
}  // namespace sfb::cnn
