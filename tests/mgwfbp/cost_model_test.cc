#include "sfb/mgwfbp/cost_model.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"
#include "sfb/mgwfbp/profile.h"

namespace sfb::mgwfbp {
namespace {

namespace fs = std::filesystem;
// The MG-WFBP authors' B-Caffe logs and OSU measurements, vendored in data/mgwfbp_profiles.
const std::string kLogs = std::string(SFB_SOURCE_DIR) + "/data/mgwfbp_profiles/shyhuai_B-Caffe/logdata";

TEST(Fit, RecoversKnownParametersFromNoisySamples) {
  std::mt19937_64 rng(3);
  for (auto [a, b] : {std::pair{100.0, 1e-3}, {5.0, 2e-4}, {800.0, 3e-3}}) {
    std::normal_distribution<double> noise(0.0, 0.02);  // 2% multiplicative noise
    std::vector<Sample> s;
    for (int64_t bytes = 4; bytes <= (int64_t{64} << 20); bytes *= 2)
      for (int r = 0; r < 5; ++r) s.push_back({bytes, (a + b * static_cast<double>(bytes)) * (1 + noise(rng))});
    const Fit f = fit_cost_model(s, 0);
    EXPECT_NEAR(f.model.b_us_per_byte, b, 0.02 * b);
    // The start-up is recovered from the small sizes, where noise is small in absolute terms.
    const Fit small = fit_cost_model(std::vector<Sample>(s.begin(), s.begin() + 60), 0);
    EXPECT_NEAR(small.model.a_us, a, 0.05 * a);
    EXPECT_GT(f.r2, 0.99);
  }
  EXPECT_THROW(fit_cost_model({{8, 1.0}}, 0), InvalidArgument);
  EXPECT_THROW(fit_cost_model({{8, 1.0}, {8, 2.0}}, 0), InvalidArgument);
}

TEST(Fit, OsuLogsOfTheAuthors) {
  // data/mgwfbp_profiles/README.md: a ~ 820 us, b ~ 3.35e-3 us/B over sizes >= 8 KiB.
  const Fit f = fit_cost_model(read_osu_log(kLogs + "/allreduce8.log"), 8192);
  EXPECT_NEAR(f.model.a_us, 820, 40);
  EXPECT_NEAR(f.model.b_us_per_byte, 3.35e-3, 0.1e-3);
  const Fit f2 = fit_cost_model(read_osu_log(kLogs + "/allreduce2.log"), 8192);
  EXPECT_NEAR(f2.model.a_us, 113, 15);
}

TEST(AlphaBeta, TableTwoFormulas) {
  const CostModel ring = alpha_beta_model(Algorithm::kRing, 8, 10, 1e-3);
  EXPECT_DOUBLE_EQ(ring.a_us, 140);
  EXPECT_DOUBLE_EQ(ring.b_us_per_byte, 1.75e-3);
  const CostModel rd = alpha_beta_model(Algorithm::kRecursiveDoubling, 8, 10, 1e-3);
  EXPECT_DOUBLE_EQ(rd.a_us, 30);
  EXPECT_DOUBLE_EQ(rd.b_us_per_byte, 3e-3);
  const CostModel tree = alpha_beta_model(Algorithm::kTree, 8, 10, 1e-3);
  EXPECT_DOUBLE_EQ(tree.a_us, 60);
  EXPECT_DOUBLE_EQ(alpha_beta_model(Algorithm::kRing, 1, 10, 1).time_us(1000), 0);
  EXPECT_THROW(parse_algorithm("butterfly"), InvalidArgument);
  EXPECT_THROW(named_network("token-ring"), InvalidArgument);
}

TEST(Profiles, CsvRoundTripAndErrors) {
  const std::string path = (fs::temp_directory_path() / ("prof_" + std::to_string(::getpid()) + ".csv")).string();
  Profile p;
  p.layers = {{"conv1", 9408, 150.5, 30}, {"fc", 1000, 20, 5}};
  write_profile_csv(path, p);
  const Profile q = read_profile_csv(path);
  ASSERT_EQ(q.size(), 2);
  EXPECT_EQ(q.layers[0].name, "conv1");
  EXPECT_EQ(q.layers[0].params, 9408);
  EXPECT_DOUBLE_EQ(q.layers[0].t_b_us, 150.5);
  EXPECT_DOUBLE_EQ(q.forward_us, 35);
  std::ofstream(path) << "name,params,t_b\nconv,12,x\n";
  try {
    read_profile_csv(path);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(path + ":2: t_b 'x'"));
  }
  std::ofstream(path) << "layer,size\n";
  EXPECT_THROW(read_profile_csv(path), DataError);
  fs::remove(path);
}

// The sf and t_sf columns (layers with sufficient factors) survive a round trip; the reference
// networks have their published parameter counts and factors only on fully-connected layers.
TEST(Profiles, SufficientFactorColumnsAndReferenceNetworks) {
  const std::string path = (fs::temp_directory_path() / ("prof_sf_" + std::to_string(::getpid()) + ".csv")).string();
  const Profile alex = reference_profile("alexnet", 32, 1000);
  EXPECT_EQ(alex.total_params(), 61100840);  // torchvision AlexNet
  EXPECT_EQ(reference_profile("vgg16", 32, 1000).total_params(), 138357544);
  const LayerTiming& fc7 = alex.layers[6];
  EXPECT_EQ(fc7.sf_floats, 32 * (4096 + 4096));
  EXPECT_DOUBLE_EQ(fc7.t_sf_us, 2.0 * 32 * 4096 * 4096 / 1e6);  // 1000 GFLOP/s = 1e6 FLOP/us
  EXPECT_DOUBLE_EQ(fc7.t_b_us, 2 * fc7.t_f_us);
  EXPECT_EQ(alex.layers[0].sf_floats, 0);  // a convolution
  write_profile_csv(path, alex);
  const Profile q = read_profile_csv(path);
  ASSERT_EQ(q.size(), alex.size());
  for (int l = 0; l < q.size(); ++l) {
    EXPECT_EQ(q.layers[l].sf_floats, alex.layers[l].sf_floats) << l;
    EXPECT_NEAR(q.layers[l].t_sf_us, alex.layers[l].t_sf_us, 1e-5 * alex.layers[l].t_sf_us) << l;
  }
  std::ofstream(path) << "name,params,t_b,sf\nfc,12,1,3\n";
  EXPECT_THAT([&] { read_profile_csv(path); },
              ::testing::ThrowsMessage<DataError>(::testing::HasSubstr("'name,params,t_b[,t_f][,sf,t_sf]'")));
  EXPECT_THROW(reference_profile("resnet", 32, 1000), InvalidArgument);
  fs::remove(path);
}

TEST(Profiles, BcaffeGoogLeNetLog) {
  const Profile p = read_bcaffe_log(kLogs + "/tmp8comm.log");
  ASSERT_EQ(p.size(), 64);
  EXPECT_EQ(p.total_params(), 13379136);  // README: the sum over one block
  EXPECT_EQ(p.layers[0].params, 9408 + 64);
  EXPECT_DOUBLE_EQ(p.layers[0].t_b_us, 15143.7);  // last block of the file
  EXPECT_GT(p.backward_us(), 190e3);
  EXPECT_LT(p.backward_us(), 215e3);
}

}  // namespace
}  // namespace sfb::mgwfbp
