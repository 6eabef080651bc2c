// The CNN model and checkpoint files (cnn_file.h, docs/formats.md): round trips, every corruption
// refused with the field named, a file of another network refused naming the first differing
// layer; checkpoint and resume in the executor (bit for bit on the same ranks, and on other
// ranks), a stop signal on one rank stopping every rank at the same iteration; the planner
// registry is what make_plan accepts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "sfb/cnn/cnn_file.h"
#include "sfb/cnn/executor.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/hash.h"
#include "testing/configs.h"
#include "testing/files.h"
#include "testing/rank_threads.h"

namespace sfb::cnn {
namespace {

using ::testing::HasSubstr;

io::Dataset images(int n, uint64_t seed) {
  io::Dataset d;
  d.n = n;
  d.dim = 64;
  d.classes = 3;
  d.dense.resize(n, d.dim);
  Rng rng = make_rng(seed, 1);
  std::uniform_real_distribution<float> u(0, 1);
  for (Eigen::Index i = 0; i < d.dense.size(); ++i) d.dense.data()[i] = u(rng);
  for (int i = 0; i < n; ++i) d.labels.push_back(static_cast<int32_t>(rng() % 3));
  return d;
}

constexpr const char* kLayers = "conv:4:3:1,relu,pool:2,conv:4:3:1,relu,fc:16,relu,fc:3";

CnnFile sample_file(bool checkpoint) {
  Network net(kLayers, {1, 8, 8});
  Rng rng = make_rng(7, 0);
  net.init(rng);
  CnnFile f;
  f.checkpoint = checkpoint;
  f.fingerprint = 0x1234;
  f.seed = 7;
  f.iteration = 40;
  f.ranks = 4;
  f.network = network_spec(net, "1x8x8");
  f.params = get_params(net);
  if (checkpoint) {
    f.velocity.assign(f.params.size(), 0.5f);
    mgwfbp::Profile prof{"live", {}, 12.5};
    for (int p = 0; p < net.param_layers(); ++p)
      prof.layers.push_back({net.param_label(p), net.param_floats(p), 10.0 + p, 0, net.factor_floats(p) * 4, 1.5});
    f.plan = PlanState{{{3, 3, true}, {0, 2, false}}, {10, 1e-3, 20, 2e-3, 4}, prof};
  }
  return f;
}

std::string error_of(std::span<const std::byte> bytes) {
  try {
    decode_cnn_file(bytes, "f.bin");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(CnnFile, ModelAndCheckpointRoundTrip) {
  for (bool ck : {false, true}) {
    const CnnFile f = sample_file(ck);
    const Bytes b = encode_cnn_file(f);
    const CnnFile g = decode_cnn_file(b, "f.bin");
    EXPECT_EQ(g.checkpoint, ck);
    EXPECT_EQ(g.fingerprint, f.fingerprint);
    EXPECT_EQ(g.iteration, 40);
    EXPECT_EQ(g.ranks, 4);
    EXPECT_EQ(g.params, f.params);
    EXPECT_EQ(g.velocity, f.velocity);
    ASSERT_EQ(g.network.layers.size(), 8u);
    EXPECT_EQ(g.network.layers[0].label, "conv1");
    EXPECT_EQ(g.network.layers[0].spec, "conv:4:3:1");
    EXPECT_EQ(g.network.layers[7].label, "fc2");
    EXPECT_EQ(g.plan.has_value(), ck);
    if (ck) {
      EXPECT_EQ(g.plan->plan, f.plan->plan);
      EXPECT_EQ(g.plan->cost.b_us_per_byte, 1e-3);
      EXPECT_EQ(g.plan->profile.layers[3].name, "fc2");
      EXPECT_EQ(g.plan->profile.forward_us, 12.5);
    }
    // The parameters sit where the header says (a reader may skip everything else).
    uint64_t offset = 0;
    std::memcpy(&offset, b.data() + 56, 8);
    float first = 0;
    std::memcpy(&first, b.data() + offset, 4);
    EXPECT_EQ(first, f.params[0]);
  }
}

TEST(CnnFile, EveryCorruptionIsRefusedNamingTheField) {
  const Bytes good = encode_cnn_file(sample_file(true));
  EXPECT_THAT(error_of(std::span(good).first(30)), HasSubstr("truncated"));
  EXPECT_THAT(error_of(std::span(good).first(good.size() - 3)), HasSubstr("checksum mismatch"));
  for (size_t at : {size_t{9}, size_t{40}, size_t{70}, good.size() / 2, good.size() - 1}) {
    Bytes bad = good;
    bad[at] ^= std::byte{0x10};
    EXPECT_FALSE(error_of(bad).empty()) << "byte " << at << " flipped was accepted";
  }
  Bytes magic = good;
  magic[7] = std::byte{'X'};
  EXPECT_THAT(error_of(magic), HasSubstr("bad magic"));
  // A layer's tensor claiming 2^31 x 2^31 floats, CRC fixed up: refused by the file's size before
  // any allocation (the product once wrapped around and reached one).
  Bytes huge = good;
  const int64_t fc[2] = {3, 16}, big[2] = {int64_t{1} << 31, int64_t{1} << 31};
  const auto* fc_bytes = reinterpret_cast<const std::byte*>(fc);
  const auto at = std::search(huge.begin() + 64, huge.end(), fc_bytes, fc_bytes + 16);
  ASSERT_NE(at, huge.end());
  std::memcpy(&*at, big, 16);
  std::byte head[64];
  std::memcpy(head, huge.data(), 64);
  std::memset(head + 44, 0, 4);
  const uint32_t crc = crc32(std::span(huge).subspan(64), crc32(std::span<const std::byte>(head, 64)));
  std::memcpy(huge.data() + 44, &crc, 4);
  EXPECT_THAT(error_of(huge), HasSubstr("a 2147483648 x 2147483648 tensor brings the network to more floats than"));
  // Non-finite values are never written.
  CnnFile nan = sample_file(false);
  nan.params[3] = std::nanf("");
  const testing::TempDir dir;
  EXPECT_THROW(write_cnn_file(dir.file("m.bin"), nan), DataError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("m.bin")));
  // The kind is checked.
  write_cnn_file(dir.file("m.bin"), sample_file(false));
  try {
    read_cnn_file(dir.file("m.bin"), true);
    FAIL() << "a model file was taken for a checkpoint";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a CNN model file, not a checkpoint"));
  }
}

TEST(CnnFile, AnotherNetworkIsRefusedNamingTheFirstDifferingLayer) {
  const NetworkSpec file = sample_file(false).network;
  const auto err = [&](const std::string& layers, const std::string& input = "1x8x8") {
    Shape s{1, 8, 8};
    if (input != "1x8x8") s = {1, 10, 10};
    try {
      Network net(layers, s);
      check_same_network(file, network_spec(net, input), "model.init = m.bin");
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(err(kLayers), "");
  EXPECT_THAT(err("conv:4:3:1,relu,pool:2,conv:4:3:1,relu,fc:32,relu,fc:3"),
              HasSubstr("layer 6 differs: the file has fc1 fc:16 (W 16 x 64, b 1 x 16), this network has fc1 fc:32 "
                        "(W 32 x 64, b 1 x 32)"));
  EXPECT_THAT(err("conv:4:3:1,relu,pool:2,conv:4:3:1,relu,fc:16,relu,fc:3,relu"), HasSubstr("layer 9: relu4"));
  EXPECT_THAT(err(kLayers, "1x10x10"), HasSubstr("takes input 1x8x8, cnn.input is 1x10x10"));
}

Config resumable_config(const std::string& dir) {
  Config c = testing::quiet_cnn(kLayers, 4, 40);
  c.optimizer.lr = 0.05;
  c.output.dir = dir;
  c.checkpoint.path = "ck.bin";
  c.checkpoint.every = 20;
  return c;
}

std::vector<ExecutorResult> train(int P, const Config& cfg, const io::Dataset& data, ExecutorStart start = {},
                                  std::function<int(int rank)> signal = {}) {
  std::vector<ExecutorResult> out(static_cast<size_t>(P));
  testing::run_ranks(P, [&](comm::Transport& t) {
    ExecutorHooks hooks;
    const int r = t.rank();
    if (signal) hooks.stop_signal = [signal, r] { return signal(r); };
    Executor ex(cfg, t, data, nullptr, hooks, 0, start);
    out[static_cast<size_t>(r)] = ex.run();
  });
  return out;
}

TEST(CnnCheckpoint, ResumeOnTheSameRanksIsBitForBitAndOnOtherRanksContinues) {
  const io::Dataset data = images(160, 21);
  const testing::TempDir dir;
  Config cfg = resumable_config(dir.path());
  const auto full = train(4, cfg, data);
  const CnnFile end = read_cnn_file(dir.file("ck.bin"), true);
  EXPECT_EQ(end.iteration, 40);
  EXPECT_EQ(end.params, full[0].params);
  EXPECT_EQ(end.velocity, full[0].velocity);
  ASSERT_TRUE(end.plan.has_value());
  EXPECT_EQ(end.plan->plan, full[0].plan);
  // The checkpoint at 20 of the same run, then 20 more from it.
  cfg.stop.max_clocks = 20;
  train(4, cfg, data);
  const CnnFile at20 = read_cnn_file(dir.file("ck.bin"), true);
  ASSERT_EQ(at20.iteration, 20);
  cfg.stop.max_clocks = 40;
  const auto resumed = train(4, cfg, data, {&at20, nullptr});
  for (const auto& r : resumed) {
    EXPECT_EQ(r.checksum, full[0].checksum) << "resumed on 4 ranks is not the uninterrupted run";
    EXPECT_EQ(r.start_iteration, 20);
    EXPECT_EQ(r.iterations.size(), 20u);
  }
  // On 2 ranks: the same state goes on (replicas equal; another data order, so other weights).
  const auto two = train(2, cfg, data, {&at20, nullptr});
  EXPECT_EQ(two[0].checksum, two[1].checksum);
  EXPECT_NE(two[0].checksum, full[0].checksum);
  EXPECT_EQ(two[0].iterations_done, 40);
  // A warm start takes the weights and nothing else: iteration 0, zero momentum.
  const auto warm = train(2, cfg, data, {nullptr, &at20});
  EXPECT_EQ(warm[0].start_iteration, 0);
  EXPECT_EQ(warm[0].iterations.size(), 40u);
}

TEST(CnnCheckpoint, ASignalOnOneRankStopsEveryRankAtTheSameIterationWithACheckpoint) {
  const io::Dataset data = images(160, 22);
  const testing::TempDir dir;
  Config cfg = resumable_config(dir.path());
  cfg.checkpoint.every = 0;  // only the final one
  cfg.stop.max_clocks = 100;
  std::atomic<int> polls{0};
  // Rank 2 is signalled from its second poll on (after iteration 20).
  const auto res = train(4, cfg, data, {}, [&](int r) { return r == 2 && ++polls >= 2 ? 15 : 0; });
  for (const auto& r : res) {
    EXPECT_EQ(r.stop_reason, StopReason::kSignal);
    EXPECT_EQ(r.iterations_done, 2 * kStopCheckEvery);
    EXPECT_EQ(r.checksum, res[0].checksum);
  }
  const CnnFile ck = read_cnn_file(dir.file("ck.bin"), true);
  EXPECT_EQ(ck.iteration, 2 * kStopCheckEvery);
  EXPECT_EQ(ck.params, res[0].params);
}

TEST(PlannerRegistry, EveryListedPlannerIsAcceptedAndNothingElse) {
  mgwfbp::Profile p{"t", {{"conv1", 100, 5.0, 0, 0, 0}, {"fc1", 1000, 7.0, 0, 50, 1.0}}, 3.0};
  const mgwfbp::CostModel c{10, 1e-3, 10, 1e-3, 4};
  for (const auto& info : mgwfbp::planners()) {
    const std::string spec = info.sized ? info.name + ":8" : info.name;
    EXPECT_NO_THROW(mgwfbp::make_plan(spec, p, c)) << spec;
    EXPECT_THAT(mgwfbp::planner_list(), HasSubstr(info.sized ? info.name + ":<MiB>" : info.name));
  }
  EXPECT_THROW(mgwfbp::make_plan("buckets", p, c), InvalidArgument);
  EXPECT_THROW(mgwfbp::make_plan("mgwfbp:3", p, c), InvalidArgument);
  EXPECT_THROW(mgwfbp::make_plan("horovod:-1", p, c), InvalidArgument);
  try {
    mgwfbp::make_plan("nope", p, c);
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr(mgwfbp::planner_list()));
  }
}

}  // namespace
}  // namespace sfb::cnn
