// The SFB engine's predictor (sfb/predict/scheme_model.h) and its profiler
// (profiler/scheme_profiler.h): the bytes it predicts are the theory sfb-compare checks the
// measured counters against; recorded profiles of the netns cluster predict what they predicted
// when recorded, and comm.scheme = "auto" picks from them the scheme that won there; the profiler
// measures on the in-process transport and every rank gets the same profile.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/baselines/dense_update.h"
#include "sfb/baselines/scheme_bytes.h"
#include "sfb/comm/sf_codec.h"
#include "sfb/comm/transport/faulty.h"
#include "sfb/core/error.h"
#include "sfb/core/fit.h"
#include "sfb/core/halton.h"
#include "sfb/core/links.h"
#include "sfb/core/row_blocks.h"
#include "sfb/io/load_data.h"
#include "sfb/mgwfbp/cost_model.h"
#include "sfb/models/registry.h"
#include "sfb/predict/crossovers.h"
#include "sfb/predict/scheme_model.h"
#include "sfb/profiler/scheme_profiler.h"
#include "testing/configs.h"
#include "testing/rank_threads.h"

namespace sfb::predict {
namespace {

using ::testing::HasSubstr;

const std::string kData = std::string(SFB_SOURCE_DIR) + "/tests/data/";

// A dense-v profile at J x D, K with round numbers.
SchemeProfile dense_profile(int64_t J, int64_t D, int64_t K) {
  SchemeProfile p;
  p.workers = 4;
  p.ranks_on_host = 1;
  p.cores = 8;
  p.J = J;
  p.D = D;
  p.K = K;
  p.sf_s = 0.1;
  p.apply_fixed_s = 0.01;
  p.apply_batch_s = 0.02;
  p.form_dense_s = 0.05;
  p.add_dense_s = 0.01;
  p.link = named_link("1gbe");
  p.reconcile = "mean";
  return p;
}

TEST(FitLine, RecoversALineAndItsR2) {
  const auto f = fit_line({1, 2, 3, 4}, {5, 7, 9, 11});
  EXPECT_DOUBLE_EQ(f.a, 3);
  EXPECT_DOUBLE_EQ(f.b, 2);
  EXPECT_DOUBLE_EQ(f.r2, 1);
  EXPECT_LT(fit_line({1, 2, 3, 4}, {1, 3, 2, 4}).r2, 0.7);
  EXPECT_THROW(fit_line({1}, {1}), InvalidArgument);
}

TEST(NamedLinks, LineRateAndUnknownNames) {
  EXPECT_DOUBLE_EQ(named_link("10gbe").b_us_per_byte, 8e-4);
  EXPECT_DOUBLE_EQ(named_link("100gbe").b_us_per_byte, 8e-5);
  try {
    named_link("40gbe");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("\"40gbe\""));
    EXPECT_THAT(e.what(), HasSubstr("25gbe"));
  }
}

TEST(Schemes, Parse) {
  EXPECT_EQ(parse_scheme("halton:3").q, 3);
  EXPECT_EQ(parse_scheme("fms:2").servers, 2);
  EXPECT_EQ(parse_scheme("fms").label(), "fms:s1");
  EXPECT_EQ(parse_scheme("fms:n").servers, 0);
  EXPECT_EQ(parse_scheme("fms:n").label(), "fms:n");
  EXPECT_THROW(parse_scheme("ring"), InvalidArgument);
  EXPECT_THROW(parse_scheme("fms:0"), InvalidArgument);
  EXPECT_THROW(parse_scheme("allreduce:2"), InvalidArgument);
}

// The predicted bytes per clock are theory_bytes_per_clock's (sfb-compare's theory column) for
// every scheme, Halton's reconciliation included.
TEST(SchemeModel, BytesAreTheTheory) {
  const SchemeProfile p = dense_profile(1024, 512, 32);
  for (int N : {4, 8, 16}) {
    Config cfg;
    cfg.optimizer.minibatch = p.K;
    const Target t{N, named_link("1gbe"), 1, false};
    const auto theory = [&](const std::string& scheme, const std::string& broadcast) {
      cfg.comm.scheme = *choice_named<sfb::Scheme>(scheme);
      cfg.sfb.broadcast = *choice_named<Broadcast>(broadcast);
      return baselines::theory_bytes_per_clock(cfg, N, p.J, p.D, -1);
    };
    EXPECT_NEAR(predict(p, Scheme::sfb_full(), t).bytes_per_clock, theory("sfb", "full"), 1e-6) << N;
    EXPECT_NEAR(predict(p, Scheme::halton(0), t).bytes_per_clock, theory("sfb", "halton"), 1e-6) << N;
    EXPECT_NEAR(predict(p, Scheme::fms(2), t).bytes_per_clock, theory("fms", "full"), 1e-6) << N;
    EXPECT_NEAR(predict(p, Scheme::allreduce(), t).bytes_per_clock, theory("allreduce", "full"), 1e-6) << N;
  }
}

TEST(SchemeModel, PhasesAddUpAndScaleAsTheModelSays) {
  const SchemeProfile p = dense_profile(1024, 1024, 16);
  const Link l = named_link("10gbe");
  const auto full4 = predict(p, Scheme::sfb_full(), {4, l}), full8 = predict(p, Scheme::sfb_full(), {8, l});
  EXPECT_DOUBLE_EQ(full4.clock_s, full4.compute_s + full4.comm_s + full4.update_s + full4.engine_s);
  // Each worker applies its own batch and every peer's: apply_fixed + N apply_batch.
  EXPECT_DOUBLE_EQ(full8.update_s, 0.01 + 8 * 0.02);
  // Its link carries N - 1 batches of K (J + D) floats.
  EXPECT_NEAR(full8.comm_s, (l.a_us + 7 * 16 * 2048 * 4 * 8e-4) * 1e-6, 1e-12);
  // FMS with one server: its link carries every worker's W each way, pushes and pulls at once,
  // while the workers form their updates block by block (forming hides that much of the push) and
  // the server adds each block's 8 pushes as later blocks arrive: the slower of push and adds,
  // then the last of its 8 blocks' adds (W / 8 = 512 KiB blocks) and the pipeline's fill and
  // drain: every worker's first and last block, 2 x 8 blocks on the server's link.
  const double adds = 8 * 0.01;
  const auto fms = predict(p, Scheme::fms(1), {8, l});
  const double push = (l.a_us + 8 * 4.0 * 1024 * 1024 * 8e-4) * 1e-6;
  ASSERT_LT(push, adds);  // at 10 GbE the server's adds decide
  EXPECT_NEAR(fms.comm_s, adds + adds / 8 + 16 * 512 * 1024 * 8e-4 * 1e-6, 1e-12);
  // On a link 10x slower the push decides.
  const Link slow{"slow", l.a_us, 8e-3};
  const double slow_push = (slow.a_us + 8 * 4.0 * 1024 * 1024 * 8e-3) * 1e-6;
  ASSERT_GT(slow_push - p.form_dense_s, adds);
  EXPECT_NEAR(predict(p, Scheme::fms(1), {8, slow}).comm_s,
              slow_push - p.form_dense_s + adds / 8 + 16 * 512 * 1024 * 8e-3 * 1e-6, 1e-12);
  // Ranks sharing cores: all 8 on the profiled 8-core host changes nothing, 16 double compute.
  const auto shared16 = predict(p, Scheme::sfb_full(), {16, l, 0});
  EXPECT_DOUBLE_EQ(predict(p, Scheme::sfb_full(), {8, l, 0}).compute_s, p.sf_s);
  EXPECT_DOUBLE_EQ(shared16.compute_s, 2 * p.sf_s);
  EXPECT_DOUBLE_EQ(predict(p, Scheme::sfb_full(), {16, l, 1}).compute_s, p.sf_s);
  EXPECT_EQ(sfb::halton_receivers(8, 0), 3);
  EXPECT_EQ(sfb::halton_receivers(4, 9), 3);
}

// One catalogue of links for both predictors: "10gbe" is the same link in sfb-plan and mgwfbp-plan.
TEST(NamedLinks, OneCatalogueForBothPredictors) {
  for (const auto& name : link_names()) {
    const Link l = named_link(name);
    const mgwfbp::Network n = mgwfbp::named_network(name);
    EXPECT_DOUBLE_EQ(l.a_us, n.alpha_us) << name;
    EXPECT_DOUBLE_EQ(l.b_us_per_byte, n.beta_us_per_byte) << name;
  }
  EXPECT_NEAR(named_link("10gbe").a_us, 37.36, 0.01);  // the MG-WFBP authors' 523 us ring start-up / 14
}

Target at_shape(int nodes, const Link& l, const Shape& s, double cores = 0) {
  Target t{nodes, l, 1, false};
  t.shape = s;
  t.cores = cores;
  return t;
}

// The profile's shape given explicitly predicts what no shape does; the pieces scale with their
// work: K J w for SF computation and the per-pair apply, J D for the pass over W and the add, the
// batch's bytes by the codec's formula plus the measured header.
TEST(Shapes, PiecesScaleWithTheirWork) {
  SchemeProfile p = dense_profile(1000, 500, 16);
  p.batch_bytes = static_cast<int64_t>(batch_payload_bytes(p.shape())) + 56;
  const Link l = named_link("10gbe");
  for (const char* s : {"sfb", "halton", "fms:2", "allreduce"}) {
    EXPECT_DOUBLE_EQ(predict(p, parse_scheme(s), at_shape(8, l, p.shape())).clock_s,
                     predict(p, parse_scheme(s), {8, l}).clock_s)
        << s;
  }
  Shape big = p.shape();
  big.J *= 2;
  big.K *= 3;
  const Pieces x = pieces_at(p, big, p.rank_cores(), p.ranks_on_host);
  EXPECT_DOUBLE_EQ(x.sf_s, 6 * p.sf_s);
  EXPECT_DOUBLE_EQ(x.apply_batch_s, 6 * p.apply_batch_s);
  EXPECT_DOUBLE_EQ(x.apply_fixed_s, 2 * p.apply_fixed_s);
  EXPECT_DOUBLE_EQ(x.add_dense_s, 2 * p.add_dense_s);
  // Forming the dense update: its W part (add's share) as J D, its GEMM part as K J w.
  EXPECT_DOUBLE_EQ(x.form_dense_s, p.form_dense_s * (0.01 * 2 + 0.02 * 6) / 0.03);
  EXPECT_DOUBLE_EQ(x.batch_bytes, 48.0 * (2000 + 500) * 4 + 56);
  const auto sfb8 = predict(p, Scheme::sfb_full(), at_shape(8, l, big));
  EXPECT_DOUBLE_EQ(sfb8.compute_s, 6 * p.sf_s);
  EXPECT_DOUBLE_EQ(sfb8.bytes_per_clock, 8 * 7 * x.batch_bytes);
  // Rank 0's evaluations: 32 rows a clock cost two batches' SF computation, in every scheme.
  SchemeProfile e = p;
  e.eval_rows_per_clock = 32;
  EXPECT_DOUBLE_EQ(predict(e, Scheme::sfb_full(), {8, l}).compute_s, 3 * p.sf_s);
  EXPECT_DOUBLE_EQ(predict(e, Scheme::allreduce(), {8, l}).compute_s, 3 * p.sf_s + p.form_dense_s);
  // Sparse v: the width is the nonzeros.
  SchemeProfile q = p;
  q.sparse_v = true;
  q.v_nonzeros = 20;
  Shape wider = q.shape();
  wider.v_nonzeros = 50;
  EXPECT_DOUBLE_EQ(pieces_at(q, wider, q.rank_cores(), q.ranks_on_host).sf_s, 2.5 * q.sf_s);
  q.sf_fixed_s = 0.05;  // sparse v has no pass over W: a fixed part (hand-written) is ignored
  EXPECT_DOUBLE_EQ(pieces_at(q, wider, q.rank_cores(), q.ranks_on_host).sf_s, 2.5 * q.sf_s);
  // The SF computation's part that does not grow with K (a dense model's pass over W) goes as J D,
  // the rest as K J w; at the profile's own shape nothing moves.
  SchemeProfile f = p;
  f.sf_fixed_s = 0.04;
  EXPECT_NEAR(pieces_at(f, big, f.rank_cores(), f.ranks_on_host).sf_s, 0.04 * 2 + 0.06 * 6, 1e-12);
  EXPECT_NEAR(pieces_at(f, f.shape(), f.rank_cores(), f.ranks_on_host).sf_s, f.sf_s, 1e-12);
  Shape more_k = f.shape();
  more_k.K *= 2;
  EXPECT_NEAR(pieces_at(f, more_k, f.rank_cores(), f.ranks_on_host).sf_s, 0.04 + 0.06 * 2, 1e-12);
}

// A profile taken on a W that fits in cache predicts a W of gigabytes no faster than the measured
// memory bandwidth; at its own shape the floor changes nothing.
TEST(Shapes, NoFasterThanMemory) {
  SchemeProfile p = dense_profile(512, 512, 64);
  p.add_dense_s = 1e-5;  // 3 MiB of traffic in 10 us: cache speed
  p.mem_bytes_per_s = 5e9;
  Shape big = p.shape();
  big.J = 50000;
  big.D = 20000;
  const Pieces x = pieces_at(p, big, p.rank_cores(), p.ranks_on_host);
  EXPECT_DOUBLE_EQ(x.add_dense_s, 12.0 * 50000 * 20000 / 5e9);
  EXPECT_GT(x.add_dense_s, 1e-5 * 50000.0 * 20000 / (512 * 512));
  EXPECT_GE(x.apply_fixed_s, 8.0 * 50000 * 20000 / 5e9);
  const Pieces same = pieces_at(p, p.shape(), p.rank_cores(), p.ranks_on_host);
  EXPECT_DOUBLE_EQ(same.add_dense_s, p.add_dense_s);
}

// A rank computes with min(threads, cores / ranks sharing them): 4 ranks on 2 cores profiled, one
// rank of 16 threads on a 16-core node predicted, 32x faster compute; memory bandwidth grows with
// the cores only up to the profiled machine's (its 2 cores: 4 ranks' worth).
TEST(Shapes, CoresOfTheTargetNode) {
  SchemeProfile p = dense_profile(1024, 1024, 16);
  p.ranks_on_host = 4;
  p.cores = 2;
  p.mem_bytes_per_s = 1e9;
  const Link l = named_link("10gbe");
  EXPECT_DOUBLE_EQ(p.rank_cores(), 0.5);
  const Target t16 = at_shape(8, l, p.shape(), 16);
  EXPECT_DOUBLE_EQ(target_rank_cores(p, t16), 16);
  EXPECT_DOUBLE_EQ(predict(p, Scheme::sfb_full(), t16).compute_s, p.sf_s / 32);
  Shape big = p.shape();
  big.J *= 1000;
  const Pieces x = pieces_at(p, big, 16, 1);
  EXPECT_DOUBLE_EQ(x.add_dense_s, 12.0 * big.J * big.D / 4e9);
  // Profiled in a budget of an eighth of a core on a 2-core machine: per core 8x the measured
  // bandwidth, a 16-core node credited the machine's 2 cores' worth.
  SchemeProfile budget = p;
  budget.ranks_on_host = 1;
  budget.cores = 0.125;
  budget.machine_cores = 2;
  EXPECT_DOUBLE_EQ(pieces_at(budget, big, 16, 1).add_dense_s, 12.0 * big.J * big.D / 16e9);
  EXPECT_DOUBLE_EQ(pieces_at(budget, big, 0.125, 1).add_dense_s, 12.0 * big.J * big.D / 1e9);
  // A CPU budget of a quarter core per emulated host, one rank each.
  Target quarter = at_shape(4, l, p.shape(), 0.25);
  EXPECT_DOUBLE_EQ(target_rank_cores(p, quarter), 0.25);
  EXPECT_DOUBLE_EQ(predict(p, Scheme::sfb_full(), quarter).compute_s, 2 * p.sf_s);
}

TEST(SchemeProfile, JsonRoundTripAndErrorsNameTheKey) {
  SchemeProfile p = dense_profile(100, 50, 8);
  p.batch_bytes = 4800;
  p.job_K = 64;
  // Every engine's clock, so a key misspelt on either side shows.
  p.engine_clock_s = 0.5;
  p.engine_eval_clock_s = 0.75;
  p.engine_pair_clock_s = 0.3125;
  p.engine_allreduce_clock_s = 0.25;
  p.engine_allreduce_eval_clock_s = 0.375;
  p.engine_fms_clock_s = 1.5;
  p.engine_fms_servers = 2;
  p.engine_fms_eval_clock_s = 1.625;
  p.engine_clock_se_s = 0.0625;
  p.engine_eval_clock_se_s = 0.125;
  p.engine_allreduce_clock_se_s = 0.25;
  p.engine_allreduce_eval_clock_se_s = 0.5;
  p.engine_fms_clock_se_s = 0.03125;
  p.engine_fms_eval_clock_se_s = 0.0125;
  p.sf_fixed_s = 0.03;
  p.cpu_stolen_share = 0.0625;
  p.bcast_cpu_ns_per_byte = 0.75;
  p.engine_fms_servers_beside = 1;
  p.has_prox = true;
  p.skipped = {"the two-rank SFB engine"};
  const SchemeProfile q = profile_from_json(to_json(p), "mem");
  EXPECT_EQ(to_json(q), to_json(p));
  EXPECT_EQ(q.engine_fms_servers_beside, 1);
  EXPECT_TRUE(q.has_prox);
  {  // An earlier build's profile: the servers on hosts of their own, no prox; more beside than ran: an error.
    Json earlier = to_json(p);
    earlier.erase("engine_fms_servers_beside");
    earlier.erase("has_prox");
    earlier.erase("skipped");
    const SchemeProfile e = profile_from_json(earlier, "earlier");
    EXPECT_EQ(e.engine_fms_servers_beside, 0);
    EXPECT_FALSE(e.has_prox);
    EXPECT_TRUE(e.skipped.empty());
    EXPECT_EQ(q.skipped, std::vector<std::string>{"the two-rank SFB engine"});
    earlier["engine_fms_servers_beside"] = 3;
    EXPECT_THROW(profile_from_json(earlier, "earlier"), DataError);
    earlier["engine_fms_servers_beside"] = 0;
    earlier["skipped"] = "the SFB engine";  // not a list
    EXPECT_THROW(profile_from_json(earlier, "earlier"), DataError);
  }
  EXPECT_EQ(q.job_K, 64);
  EXPECT_EQ(q.bcast_cpu_ns_per_byte, 0.75);
  EXPECT_EQ(q.engine_allreduce_eval_clock_se_s, 0.5);  // every other key: to_json(q) above
  // Keys an earlier build did not write: missing, 0 (not measured); negative, an error naming the key.
  for (const auto& [key, field] :
       {std::pair{"bcast_cpu_ns_per_byte", &SchemeProfile::bcast_cpu_ns_per_byte},
        {"engine_clock_se_s", &SchemeProfile::engine_clock_se_s},
        {"engine_eval_clock_se_s", &SchemeProfile::engine_eval_clock_se_s},
        {"engine_allreduce_clock_se_s", &SchemeProfile::engine_allreduce_clock_se_s},
        {"engine_allreduce_eval_clock_se_s", &SchemeProfile::engine_allreduce_eval_clock_se_s},
        {"engine_fms_clock_se_s", &SchemeProfile::engine_fms_clock_se_s},
        {"engine_fms_eval_clock_se_s", &SchemeProfile::engine_fms_eval_clock_se_s}}) {
    Json earlier = to_json(p);
    earlier.erase(key);
    EXPECT_EQ(profile_from_json(earlier, "x.json").*field, 0) << key;
    earlier[key] = -1;
    EXPECT_THAT([&] { profile_from_json(earlier, "x.json"); }, ::testing::ThrowsMessage<DataError>(HasSubstr(key)));
  }
  EXPECT_EQ(q.engine_allreduce_eval_clock_s, 0.375);
  EXPECT_EQ(q.engine_fms_eval_clock_s, 1.625);
  EXPECT_EQ(q.sf_fixed_s, 0.03);
  EXPECT_EQ(q.engine_pair_clock_s, 0.3125);
  EXPECT_EQ(q.cpu_stolen_share, 0.0625);
  Json j = to_json(p);
  j["cpu_stolen_share"] = nullptr;  // not readable where it was taken
  EXPECT_EQ(profile_from_json(j, "x.json").cpu_stolen_share, -1);
  j.erase("cpu_stolen_share");  // an earlier build's profile
  EXPECT_EQ(profile_from_json(j, "x.json").cpu_stolen_share, -1);
  j["cpu_steal_share"] = 0.05;  // the build before's: a share of all the CPU time, idle included
  EXPECT_EQ(profile_from_json(j, "x.json").cpu_stolen_share, -1);
  j.erase("cpu_steal_share");
  Json with_speed = j;
  with_speed["cpu_speed"] = 4004;  // one build's speed canary (removed): read by nothing, and no error
  EXPECT_EQ(to_json(profile_from_json(with_speed, "x.json")), to_json(profile_from_json(j, "x.json")));
  EXPECT_FALSE(to_json(profile_from_json(with_speed, "x.json")).contains("cpu_speed"));
  j["cpu_stolen_share"] = 1.5;
  EXPECT_THAT([&] { profile_from_json(j, "x.json"); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("\"cpu_stolen_share\" = 1.5 is outside [0, 1]")));
  j = to_json(p);
  j.erase("engine_pair_clock_s");  // an earlier build's profile: no pair run, the excess per clock
  EXPECT_EQ(profile_from_json(j, "x.json").engine_pair_clock_s, 0);
  j = to_json(p);
  j.erase("sf_fixed_s");  // an earlier build's profile: all of the SF computation grows with K
  EXPECT_EQ(profile_from_json(j, "x.json").sf_fixed_s, 0);
  j["sf_fixed_s"] = 0.2;  // more than sf_s
  EXPECT_THAT([&] { profile_from_json(j, "x.json"); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("\"sf_fixed_s\" = 0.2 is outside [0, 0.1]")));
  j = to_json(p);
  j.erase("sf_s");
  EXPECT_THAT([&] { profile_from_json(j, "x.json"); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("x.json: the profile has no number \"sf_s\"")));
  j = to_json(p);
  j["link_b_us_per_byte"] = -1;
  EXPECT_THAT([&] { profile_from_json(j, "x.json"); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("\"link_b_us_per_byte\" = -1")));
  j = to_json(p);
  j["format"] = "other";
  EXPECT_THROW(profile_from_json(j, "x.json"), DataError);
  j = to_json(p);
  j["eval_snapshot"] = "sometimes";
  EXPECT_THAT([&] { profile_from_json(j, "x.json"); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("\"eval_snapshot\" = \"sometimes\" is not one of")));
  // Wrong types name the key (never nlohmann's bare type_error).
  for (const char* key : {"format", "config", "reconcile"}) {
    j = to_json(p);
    j[key] = Json::array({1, 2});
    EXPECT_THAT([&] { profile_from_json(j, "x.json"); },
                ::testing::ThrowsMessage<DataError>(HasSubstr(fmt::format("x.json: \"{}\" must be a string", key))));
  }
}

TEST(SchemeProfile, DeeplyNestedJsonIsRefusedWhileParsing) {
  // A field nested 10^6 arrays deep: refused at depth 33, never built (it once overflowed the stack).
  const std::string deep =
      "{\"format\": \"sfb-scheme-profile/1\", \"x\": " + std::string(1000000, '[') + std::string(1000000, ']') + "}";
  EXPECT_THAT([&] { parse_json(deep, "deep.json"); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("deep.json: JSON nested deeper than 32 levels")));
  EXPECT_THAT([&] { parse_json("{\"a\": ", "cut.json"); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("cut.json: not JSON")));
  EXPECT_EQ(parse_json("{\"a\": [[1]]}", "ok.json")["a"][0][0], 1);
}

TEST(SchemeProfile, AJsonFileOverItsSizeLimitIsRefusedBeforeItIsRead) {
  const auto path = std::filesystem::temp_directory_path() / ("sfb_big_" + std::to_string(::getpid()) + ".json");
  { std::ofstream(path) << "{}"; }
  std::filesystem::resize_file(path, (int64_t{64} << 20) + 1);  // sparse: nothing is written
  EXPECT_THAT([&] { read_profile(path.string()); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("more than the 67108864 a scheme profile may have")));
  std::filesystem::resize_file(path, 2);
  EXPECT_TRUE(read_json_file(path.string(), "test").is_object());
  std::filesystem::remove(path);
}

struct Recorded {
  const char* file;
  const char* measured_winner;  // what the netns runs measured (docs/compare.md as of commit 4b01599)
};

// Profiles measured by sfbd --profile on the netns cluster at 1 Gbit/s (4 hosts on 2 cores):
// their predictions at the profiled N are pinned (a change of the model shows here first), and
// auto's choice from them is the scheme that won the measured runs.
TEST(RecordedProfiles, PredictionsStayPutAndAutoPicksTheMeasuredWinner) {
  for (const Recorded& r : {Recorded{"scheme_profile_mlr8192_4h.json", "halton"},
                            Recorded{"scheme_profile_mlr512_k1024_4h.json", "allreduce"}}) {
    const SchemeProfile p = read_profile(kData + r.file);
    const Json j = Json::parse(std::ifstream(kData + r.file));
    const auto ranked =
        rank_schemes(p, {Scheme::sfb_full(), Scheme::halton(0), Scheme::allreduce()}, p.workers, p.ranks_on_host);
    EXPECT_EQ(ranked.front().label(), r.measured_winner) << r.file;
    // Every prediction the file was written with, recomputed from its profile.
    for (const auto& rec : j["predictions"]) {
      const auto s = parse_scheme(rec["scheme"].get<std::string>());
      const auto now = predict(p, s, {p.workers, p.link, p.ranks_on_host, true});
      EXPECT_NEAR(now.clock_s, rec["clock_s"].get<double>(), 1e-4 * now.clock_s) << r.file << " " << now.label();
      EXPECT_NEAR(now.bytes_per_clock, rec["bytes_per_clock"].get<double>(), 1e-5 * now.bytes_per_clock);
    }
  }
}

// Profiles measured by sfbd --profile on 4 netns hosts of 0.125 cores each at 1 Gbit/s
// (scripts/predict-validate.sh; the fms4_300mbit one at 300 Mbit/s with 4 FMS servers working)
// predict shapes they were not taken on, and those predictions stay put: J doubled or K doubled at
// 8 hosts (held-out rows of the validation in docs/compare-log.md; the files keep what those runs measured) and the
// J = 50,000, D = 20,000 MLR on 64 nodes of 16 cores at 10 GbE. The pieces scale by their work and no faster than the
// measured memory bandwidth, so the large shape is far slower per clock than a pure work ratio from a W that fits in
// cache would say.
TEST(RecordedProfiles, PredictionsForShapesNotProfiledStayPut) {
  for (const char* name : {"scheme_profile_mlr512_k1024_4h_cpus.json", "scheme_profile_mlr2048_k16_4h_eval.json",
                           "scheme_profile_mlr512_k1024_4h_fms4_300mbit.json"}) {
    const std::string file = kData + name;
    const SchemeProfile p = read_profile(file);
    EXPECT_EQ(p.ranks_on_host, 1);
    EXPECT_DOUBLE_EQ(p.cores, 0.125);
    ASSERT_GT(p.mem_bytes_per_s, 0);
    const Json j = Json::parse(std::ifstream(file));
    ASSERT_GE(j["shape_predictions"].size(), 8u);
    for (const auto& rec : j["shape_predictions"]) {
      Target t{rec["nodes"].get<int>(), p.link, 1, true};
      if (rec["link"] != "fitted") {
        t.link = named_link(rec["link"].get<std::string>());
        t.fitted = false;
      }
      t.shape = p.shape();
      t.shape.J = rec.value("rows", p.J);
      t.shape.D = rec.value("cols", p.D);
      t.shape.K = rec.value("minibatch", p.K);
      t.shape.v_nonzeros = static_cast<double>(t.shape.D);
      t.cores = rec.value("cores", 0.0);
      const auto now = predict(p, parse_scheme(rec["scheme"].get<std::string>()), t);
      EXPECT_NEAR(now.clock_s, rec["clock_s"].get<double>(), 1e-4 * now.clock_s) << name << " " << rec.dump();
      if (t.shape.J == 50000) {
        // W's 4 GB add on 16 cores: no faster than the profiled machine's memory (4 ranks' worth).
        const Pieces x = pieces_at(p, t.shape, 16, 1);
        EXPECT_GE(x.add_dense_s, 12.0 * 50000 * 20000 / (p.mem_bytes_per_s / 0.125 * 2) * 0.999);
      }
    }
  }
}

// The profile with 4 FMS servers working: its engine ran 0.08 s a clock beyond FMS's model, which
// FMS's predictions carry as seconds per window round of the exchange's phase: twice at J = 1024
// (twice a shard's blocks). With more workers the exchange takes the longer of its model and that
// phase, not their sum: training measured 0.206 s a clock at 4 workers and 0.194 at 8 (a flat clock
// at 8 workers in six runs of seven, where the servers' links carry twice the bytes), and
// 0.41-0.44 at J = 1024.
TEST(RecordedProfiles, FmsEnginesExcessIsCarriedByWindowRounds) {
  const SchemeProfile p = read_profile(kData + "scheme_profile_mlr512_k1024_4h_fms4_300mbit.json");
  ASSERT_EQ(p.engine_fms_servers, 4);
  const Scheme fms4 = parse_scheme("fms:4");
  Target at4{4, p.link, 1, true}, at8{8, p.link, 1, true}, wide4{4, p.link, 1, true}, wide8{8, p.link, 1, true};
  wide4.shape = wide8.shape = p.shape();
  wide4.shape.J = wide8.shape.J = 2 * p.J;
  const Prediction here = predict(p, fms4, at4), more = predict(p, fms4, at8);
  const Prediction twice4 = predict(p, fms4, wide4), twice8 = predict(p, fms4, wide8);
  EXPECT_NEAR(here.clock_s, p.engine_fms_clock_s, 1e-9);
  EXPECT_GT(here.engine_s, 0.05);
  EXPECT_DOUBLE_EQ(twice4.engine_s, 2 * here.engine_s);
  EXPECT_GT(more.comm_s, here.comm_s);  // the servers' links carry twice the bytes
  for (const auto& [at_p, at_n] : {std::pair{here, more}, std::pair{twice4, twice8}}) {
    EXPECT_NEAR(at_n.comm_s + at_n.engine_s, std::max(at_n.comm_s, at_p.comm_s + at_p.engine_s), 1e-12);
    EXPECT_GE(at_n.clock_s, at_p.clock_s);
  }
  EXPECT_NEAR(more.clock_s, here.clock_s, 1e-12);  // here the phase at 4 workers still decides
}

// A profile with its evaluations measured: at the profiled shape SFB's compute is the SF
// computation plus one evaluation, its snapshot's copy and a drift sketch per eval_every clocks;
// at a W over eval.snapshot = "auto"'s 64 MiB the monitor evaluates in place and no copy counts.
TEST(RecordedProfiles, EvaluationsAddTheirMeasuredCostPerClock) {
  SchemeProfile p = read_profile(kData + "scheme_profile_mlr2048_k16_4h_eval.json");
  ASSERT_EQ(p.eval_every, 4);
  ASSERT_GT(p.eval_s, 0);
  ASSERT_GT(p.eval_copy_s, 0);
  ASSERT_GT(p.eval_sketch_s, 0);
  const Target here{p.workers, p.link, 1, true};
  const double per_eval = p.eval_s + p.eval_copy_s + p.eval_sketch_s;
  EXPECT_NEAR(predict(p, Scheme::sfb_full(), here).compute_s, p.sf_s + per_eval / 4, 1e-12);
  Target big = here;
  big.shape = p.shape();
  big.shape.J = 8 * p.J;  // 128 MiB
  big.shape.v_nonzeros = static_cast<double>(p.D);
  const Pieces x = pieces_at(p, big.shape, p.rank_cores(), 1);
  EXPECT_NEAR(predict(p, Scheme::sfb_full(), big).compute_s, x.sf_s + (x.eval_s + x.eval_sketch_s) / 4, 1e-12);
  p.eval_snapshot = Snapshot::kCopy;
  EXPECT_NEAR(predict(p, Scheme::sfb_full(), big).compute_s, x.sf_s + (x.eval_s + x.eval_copy_s + x.eval_sketch_s) / 4,
              1e-12);
  // The SFB engine measured with the monitor evaluating: what that cost its clocks over the
  // evaluations' pieces scales them for SFB and Halton (here 3x), not for the all-reduce or FMS.
  const double ar = predict(p, Scheme::allreduce(), here).compute_s;
  const double fms = predict(p, Scheme::fms(1), here).compute_s;
  ASSERT_GT(p.engine_clock_s, 0);
  p.eval_snapshot = Snapshot::kAuto;
  p.engine_eval_clock_s = p.engine_clock_s + 3 * per_eval / 4;
  EXPECT_NEAR(p.anchors().eval, 3.0, 1e-9);
  EXPECT_NEAR(predict(p, Scheme::sfb_full(), here).compute_s, p.sf_s + 3 * per_eval / 4, 1e-12);
  EXPECT_NEAR(predict(p, Scheme::halton(0), here).compute_s, p.sf_s + 3 * per_eval / 4, 1e-12);
  EXPECT_NEAR(predict(p, Scheme::allreduce(), here).compute_s, ar, 1e-12);
  EXPECT_NEAR(predict(p, Scheme::fms(1), here).compute_s, fms, 1e-12);
  p.engine_eval_clock_s = p.engine_clock_s / 2;  // faster with evaluations (noise): they cost nothing
  EXPECT_EQ(p.anchors().eval, 0.0);
  p.engine_eval_clock_s = 0;  // not measured: their pieces
  EXPECT_EQ(p.anchors().eval, 1.0);
  // The all-reduce's and FMS's engines measured with the monitor evaluating scale their own
  // evaluations and nobody else's; FMS's (here 4x) at the server count it was measured with. The
  // all-reduce's run beside its wait on the network: at most their pieces (here half, then 2x
  // measured and 1x taken), and a run with them faster than the run without is the engine's clock.
  ASSERT_GT(p.engine_allreduce_clock_s, 0);
  const double sfb = predict(p, Scheme::sfb_full(), here).compute_s;
  const double halton = predict(p, Scheme::halton(0), here).compute_s;
  const double ar_clock = predict(p, Scheme::allreduce(), here).clock_s;  // the engine's, and the pieces
  EXPECT_NEAR(ar_clock, p.engine_allreduce_clock_s + per_eval / 4, 1e-9);
  p.engine_allreduce_eval_clock_s = p.engine_allreduce_clock_s + 0.5 * per_eval / 4;
  EXPECT_NEAR(p.anchors().eval_allreduce, 0.5, 1e-9);
  EXPECT_NEAR(predict(p, Scheme::allreduce(), here).compute_s, ar - 0.5 * per_eval / 4, 1e-12);
  EXPECT_NEAR(predict(p, Scheme::allreduce(), here).clock_s, p.engine_allreduce_eval_clock_s, 1e-9);
  p.engine_allreduce_eval_clock_s = p.engine_allreduce_clock_s + 2 * per_eval / 4;
  EXPECT_NEAR(p.anchors().eval_allreduce, 1.0, 1e-9);
  EXPECT_NEAR(predict(p, Scheme::allreduce(), here).clock_s, ar_clock, 1e-9);
  EXPECT_NEAR(predict(p, Scheme::fms(1), here).compute_s, fms, 1e-12);
  EXPECT_NEAR(predict(p, Scheme::sfb_full(), here).compute_s, sfb, 1e-12);
  EXPECT_NEAR(predict(p, Scheme::halton(0), here).compute_s, halton, 1e-12);
  const double allreduce_s = p.engine_allreduce_clock_s;
  p.engine_allreduce_eval_clock_s = 0.9 * allreduce_s;  // faster with them
  EXPECT_EQ(p.anchors().eval_allreduce, 0.0);
  EXPECT_NEAR(predict(p, Scheme::allreduce(), here).clock_s, 0.9 * allreduce_s, 1e-9);
  p.engine_allreduce_eval_clock_s = allreduce_s + 2 * per_eval / 4;
  p.engine_fms_clock_s = 0.5;
  p.engine_fms_servers = 1;
  const Scheme fms1 = parse_scheme("fms:1"), fms2 = parse_scheme("fms:2");
  const double fms1_measured = predict(p, fms1, here).compute_s;
  const double fms2_measured = predict(p, fms2, here).compute_s;
  p.engine_fms_eval_clock_s = 0.5 + 4 * per_eval / 4;
  EXPECT_NEAR(p.anchors().eval_fms, 4.0, 1e-9);
  EXPECT_NEAR(predict(p, fms1, here).compute_s, fms1_measured + 3 * per_eval / 4, 1e-12);
  EXPECT_NEAR(predict(p, fms2, here).compute_s, fms2_measured, 1e-12);  // measured with 1 server
  EXPECT_NEAR(predict(p, Scheme::allreduce(), here).clock_s, ar_clock, 1e-9);
  EXPECT_NEAR(predict(p, Scheme::halton(0), here).compute_s, halton, 1e-12);
  p.engine_fms_eval_clock_s = 0.4;  // faster with evaluations: they cost nothing
  EXPECT_EQ(p.anchors().eval_fms, 0.0);
  p.engine_allreduce_eval_clock_s = p.engine_fms_eval_clock_s = 0;  // not measured: their pieces
  EXPECT_EQ(p.anchors().eval_allreduce, 1.0);
  EXPECT_EQ(p.anchors().eval_fms, 1.0);
  EXPECT_NEAR(predict(p, Scheme::allreduce(), here).compute_s, ar, 1e-12);
  // No evaluations, no cost.
  p.eval_every = 0;
  p.eval_rows_per_clock = 0;
  EXPECT_NEAR(predict(p, Scheme::sfb_full(), here).compute_s, p.sf_s, 1e-12);
}

// FMS's engine measured with its servers anchors every FMS prediction. Slower than the model (here
// twice), what it leaves is seconds per window round of a server's shard (ps_rounds) in the
// exchange's phase at the profile's N, as many rounds as the shard has at another shape or server
// count; with more workers the exchange takes the longer of its model and that phase. Faster (here
// half), a ratio on all of FMS, at any N, shape and server count.
TEST(SchemeModel, FmsMeasuredWithItsServersAnchorsFms) {
  SchemeProfile p = dense_profile(512, 512, 64);
  const SchemeProfile q = p;  // no FMS engine measured
  const Target here{p.workers, p.link, 1, true};
  const double plain = predict(q, parse_scheme("fms:1"), here).clock_s;
  p.engine_fms_clock_s = 2 * plain;
  p.engine_fms_servers = 1;
  EXPECT_NEAR(predict(p, parse_scheme("fms:1"), here).clock_s, p.engine_fms_clock_s, 1e-12);
  // W of 1 MiB: one server's shard is 8 blocks of 128 KiB (64 rows), 2 rounds.
  ASSERT_EQ(ps_rounds(p.J, p.D, 1), 2);
  const double per_round = plain / 2;
  Target big{8, p.link, 1, true};
  big.shape = p.shape();
  big.shape.J = 32 * p.J;  // 32 MiB: 8 rounds of 4 blocks of 1 MiB on one server, 4 on two
  Target big_here = big;
  big_here.nodes = p.workers;
  for (const Target& t : {Target{8, p.link, 1, true}, big, here, big_here})
    for (const char* name : {"fms:1", "fms:2", "fms:n"}) {
      const Scheme s = parse_scheme(name);
      const Shape sh = target_shape(p, t);
      const int servers = s.servers > 0 ? s.servers : t.nodes;
      const double excess = per_round * static_cast<double>(ps_rounds(sh.J, sh.D, servers));
      Target profiled = t;
      profiled.nodes = p.workers;
      const double phase = predict(q, Scheme::fms(servers), profiled).comm_s + excess;
      const Prediction mine = predict(p, s, t), unmeasured = predict(q, s, t);
      if (t.nodes == p.workers)
        EXPECT_NEAR(mine.engine_s, excess, 1e-12) << name << " " << sh.J;
      else
        EXPECT_NEAR(mine.comm_s + mine.engine_s, std::max(mine.comm_s, phase), 1e-12) << name << " " << sh.J;
      EXPECT_NEAR(mine.clock_s, unmeasured.clock_s + mine.engine_s, 1e-12) << name << " " << sh.J;
    }
  EXPECT_EQ(ps_rounds(big.shape.J, p.D, 1), 8);
  EXPECT_EQ(ps_rounds(big.shape.J, p.D, 8), 2);  // fms:n at 8 nodes: 4 MiB shards, 8 blocks of 512 KiB
  // Faster than the model: half of it at any shape and server count where the workers outnumber
  // the servers, as at the profile's 4 workers and 1 server; with a server per node (N <= S, where a
  // worker's link is the busiest) the model alone. No residual.
  p.engine_fms_clock_s = plain / 2;
  for (const Target& t : {Target{8, p.link, 1, true}, big})
    for (const char* name : {"fms:1", "fms:2", "fms:n"}) {
      const Prediction mine = predict(p, parse_scheme(name), t);
      EXPECT_EQ(mine.engine_s, 0.0);
      const double model = predict(q, parse_scheme(name), t).clock_s;
      EXPECT_NEAR(mine.clock_s, std::string(name) == "fms:n" ? model : model / 2, 1e-12) << name;
    }
  // Measured with as many servers as workers: the ratio holds where N <= S only.
  p.engine_fms_servers = p.workers;
  const double plain4 = predict(q, parse_scheme("fms:4"), here).clock_s;
  p.engine_fms_clock_s = plain4 / 2;
  EXPECT_NEAR(predict(p, parse_scheme("fms:4"), here).clock_s, plain4 / 2, 1e-12);
  EXPECT_NEAR(predict(p, parse_scheme("fms:n"), big).clock_s, predict(q, parse_scheme("fms:n"), big).clock_s / 2,
              1e-12);
  for (const char* name : {"fms:1", "fms:4"})
    EXPECT_NEAR(predict(p, parse_scheme(name), big).clock_s, predict(q, parse_scheme(name), big).clock_s, 1e-12)
        << name;
}

// FMS's servers where mpirun --map-by node puts them on as many hosts as workers: server s beside
// worker s. A server's link then carries the other N - 1 workers' shares and its worker's pulls from
// the other S - 1 servers, (N + S - 2) / S of W each way, not N / S: one server at 4 workers on a
// 1 GbE link sends 3 W, not 4 W, and its fill is the 2 (N - 1) blocks that cross it. With more
// servers than workers they are on hosts of their own. The profile says where its servers ran, and
// its engine's anchor is taken there.
TEST(SchemeModel, FmsServersBesideTheWorkersSpareTheirOwnWorkersShare) {
  const SchemeProfile p = dense_profile(512, 512, 64);
  const double W = 4.0 * 512 * 512;
  Target own{4, Link{"100mbit", 50, 0.08}, 1, false};
  Target beside = own;
  beside.fms_beside_workers = true;
  EXPECT_DOUBLE_EQ(fms_server_link_w(4, 1, false), 4.0);
  EXPECT_DOUBLE_EQ(fms_server_link_w(4, 1, true), 3.0);
  EXPECT_DOUBLE_EQ(fms_server_link_w(4, 4, true), 1.5);
  EXPECT_DOUBLE_EQ(fms_server_link_w(4, 2, true), 2.0);
  const Prediction o1 = predict(p, parse_scheme("fms:1"), own), b1 = predict(p, parse_scheme("fms:1"), beside);
  EXPECT_DOUBLE_EQ(o1.link_bytes_per_clock, 4 * W);
  EXPECT_DOUBLE_EQ(b1.link_bytes_per_clock, 3 * W);
  EXPECT_DOUBLE_EQ(b1.bytes_per_clock, o1.bytes_per_clock);  // the job's bytes are the theory's either way
  // The push of 3 W instead of 4 W on the server's link (minus the forming it hides), and 6 blocks of
  // fill instead of 8 (W / 8 = 128 KiB blocks): the link's time a quarter less.
  const double b = own.link.b_us_per_byte * 1e-6, block = W / 8;
  ASSERT_GT(3 * W * b, p.form_dense_s + 4 * p.add_dense_s);  // the link decides at 100 Mbit/s
  EXPECT_NEAR(o1.comm_s - b1.comm_s, W * b + 2 * block * b, 1e-9);
  // A server per worker beside them: each host's link carries 1.5 W; the workers' own links 1 W.
  EXPECT_DOUBLE_EQ(predict(p, parse_scheme("fms:n"), beside).link_bytes_per_clock, 1.5 * W);
  EXPECT_DOUBLE_EQ(predict(p, parse_scheme("fms:n"), own).link_bytes_per_clock, W);
  // More servers than workers: not beside them.
  EXPECT_FALSE(fms_beside(beside, 5));
  EXPECT_DOUBLE_EQ(predict(p, parse_scheme("fms:8"), beside).link_bytes_per_clock,
                   predict(p, parse_scheme("fms:8"), own).link_bytes_per_clock);
  // A profile whose one server ran beside worker 0, its engine twice its model there: predicted at
  // its engine where it ran, and the anchor's excess carried to hosts of their own.
  SchemeProfile q = p;
  q.engine_fms_servers = 1;
  q.engine_fms_servers_beside = 1;
  const Target here_beside{p.workers, p.link, 1, true, {}, 0, 0, true};
  const double modelled = predict(p, parse_scheme("fms:1"), here_beside).clock_s;
  q.engine_fms_clock_s = 2 * modelled;
  EXPECT_NEAR(predict(q, parse_scheme("fms:1"), here_beside).clock_s, q.engine_fms_clock_s, 1e-12);
  Target here_own = here_beside;
  here_own.fms_beside_workers = false;
  const double excess = predict(q, parse_scheme("fms:1"), here_beside).engine_s;
  EXPECT_NEAR(predict(q, parse_scheme("fms:1"), here_own).engine_s, excess, 1e-12);
  EXPECT_GT(predict(q, parse_scheme("fms:1"), here_own).comm_s, predict(q, parse_scheme("fms:1"), here_beside).comm_s);
}

// Rank 0's evaluations delay its own pushes only. With more workers than servers a worker's link
// idles while a server's carries W N / S, so the evaluations cost FMS what they cost at the profile
// less the slack the target adds: measured with 4 servers at 4 workers (no slack), at 8 workers they
// are hidden up to W on the incast link. With a server count not measured, their own time less the
// slack.
TEST(RecordedProfiles, FmsEvaluationsHideInAWorkersSlack) {
  SchemeProfile p = read_profile(kData + "scheme_profile_mlr2048_k16_4h_eval.json");
  ASSERT_EQ(p.workers, 4);
  ASSERT_GT(p.eval_s, 0);
  p.engine_fms_servers = 4;
  p.engine_fms_clock_s = 0.4;
  SchemeProfile free = p;  // evaluations measured at no cost
  free.engine_fms_eval_clock_s = free.engine_fms_clock_s;
  const Scheme fms4 = parse_scheme("fms:4"), fms2 = parse_scheme("fms:2");
  const Target at4{4, p.link, 1, true}, at8{8, p.link, 1, true}, at16{16, p.link, 1, true};
  const double slack = 4.0 * static_cast<double>(p.J * p.D) * p.incast().b_us_per_byte * 1e-6;  // W at 8
  ASSERT_GT(slack, 0.01);
  for (const double cost : {slack / 2, 2 * slack}) {
    p.engine_fms_eval_clock_s = p.engine_fms_clock_s + cost;
    const auto evals = [&](const Scheme& s, const Target& t) {
      return predict(p, s, t).compute_s - predict(free, s, t).compute_s;
    };
    EXPECT_NEAR(evals(fms4, at4), cost, 1e-12);
    EXPECT_NEAR(evals(fms4, at8), std::max(0.0, cost - slack), 1e-12) << cost;
    EXPECT_NEAR(evals(fms4, at16), std::max(0.0, cost - 3 * slack), 1e-12) << cost;
    // 2 servers, not measured: the evaluations' own time, less the slack (W at 4 workers).
    const Target at2{2, p.link, 1, true};
    const Pieces x = pieces_at(p, p.shape(), target_rank_cores(p, at2), 1);
    const double own = predict(p, fms2, at2).compute_s - (x.sf_s + x.form_dense_s);
    ASSERT_GT(own, 0);
    EXPECT_NEAR(predict(p, fms2, at4).compute_s, x.sf_s + x.form_dense_s + std::max(0.0, own - slack), 1e-12);
  }
}

// FMS's shards, blocks and window rounds and the all-reduce's calls are cut from the stored
// matrix's rows, as the engines cut them: a 10 x 2^20 W (40 MiB) is 10 rows of 4 MiB row-major
// and 2^20 rows of 40 bytes feature-major (MLR's layout on sparse data).
TEST(SchemeModel, ShardsAndCallsAreCutFromTheStoredRows) {
  SchemeProfile p = dense_profile(10, 1 << 20, 8);
  p.allreduce_a_us = 4000;
  p.allreduce_b_us_per_byte = 0.012;
  p.allreduce_block_bytes = 1 << 20;
  const Target here{p.workers, p.link, 1, true};
  Target narrow{8, p.link, 1, true};  // W of 10 MiB: 10 x 2^18
  narrow.shape = p.shape();
  narrow.shape.D = 1 << 18;
  p.engine_allreduce_clock_s = 1.0;  // its anchor counts the calls at the profile's own W
  std::vector<double> grows, allreduce, halton;
  for (const Layout l : {Layout::kRowMajor, Layout::kFeatureMajor}) {
    p.layout = l;
    const int64_t r0 = stored_rows(l, p.J, p.D), c0 = stored_cols(l, p.J, p.D);
    const DenseAnchor expect =
        dense_anchor(p.engine_allreduce_clock_s,
                     p.sf_s + p.form_dense_s + p.allreduce_s(4 * p.J * p.D, dense_allreduce_calls(r0, c0), p.workers) +
                         p.add_dense_s);
    EXPECT_DOUBLE_EQ(p.anchors().dense.ratio, expect.ratio) << layout_name(l);
    EXPECT_DOUBLE_EQ(p.anchors().dense.s, expect.s) << layout_name(l);
    p.engine_fms_clock_s = 0;
    p.engine_fms_clock_s = 2 * predict(p, parse_scheme("fms:4"), here).clock_s;
    p.engine_fms_servers = 4;
    const Shape& n = narrow.shape;
    EXPECT_EQ(p.stored_rows(p.shape()), stored_rows(l, p.J, p.D));
    EXPECT_EQ(p.stored_cols(n), stored_cols(l, n.J, n.D));
    // The FMS engine's excess is seconds per window round: it grows by the rounds of the stored rows.
    const auto rounds = [&](const Shape& s) {
      return static_cast<double>(ps_rounds(p.stored_rows(s), p.stored_cols(s), 4));
    };
    Target narrow_here = narrow;  // at the profile's N (more workers: FmsMeasuredWithItsServersAnchorsFms)
    narrow_here.nodes = p.workers;
    const double at_profile = predict(p, parse_scheme("fms:4"), here).engine_s;
    grows.push_back(predict(p, parse_scheme("fms:4"), narrow_here).engine_s / at_profile);
    EXPECT_NEAR(grows.back(), rounds(n) / rounds(p.shape()), 1e-12) << layout_name(l);
    allreduce.push_back(predict(p, Scheme::allreduce(), narrow).comm_s);
    EXPECT_NEAR(allreduce.back(),
                p.allreduce_s(4 * n.J * n.D, dense_allreduce_calls(p.stored_rows(n), p.stored_cols(n)), 8) *
                    p.anchors().dense.ratio,
                1e-12)
        << layout_name(l);
    // Halton's reconciliation all-reduces W in blocks of the stored rows too.
    const Prediction h = predict(p, parse_scheme("halton"), narrow);
    const int64_t every = auto_reconcile_every(8, h.q, n.K, n.J, n.D, n.v_width());
    halton.push_back(h.comm_s - p.allreduce_s(4 * n.J * n.D, reconcile_calls(p.stored_rows(n), p.stored_cols(n)), 8) /
                                    static_cast<double>(every));
  }
  EXPECT_NEAR(halton[0], halton[1], 1e-12);  // the rest of Halton's network is the layout's alike
  // Row-major: a server's shard is 3 rows (of 4 MiB, then of 1 MiB), a block each, 1 round at
  // either D. Feature-major: 262,144 rows of 40 bytes (10 MiB, 11 blocks of 1 MiB, 3 rounds), then
  // 65,536 (2.5 MiB, 8 blocks of 320 KiB, 2 rounds).
  EXPECT_EQ(ps_rounds(10, 1 << 20, 4), 1);
  EXPECT_EQ(ps_rounds(10, 1 << 18, 4), 1);
  EXPECT_EQ(ps_rounds(1 << 20, 10, 4), 3);
  EXPECT_EQ(ps_rounds(1 << 18, 10, 4), 2);
  EXPECT_NEAR(grows[0], 1.0, 1e-12);
  EXPECT_NEAR(grows[1], 2.0 / 3.0, 1e-12);
  // The all-reduce: 10 calls of a 1 MiB row, or 2^18 rows cut in blocks of 1 MiB (the first an
  // eighth): more calls, more start-ups.
  EXPECT_EQ(dense_allreduce_calls(10, 1 << 18), 10);
  EXPECT_EQ(dense_allreduce_calls(1 << 18, 10), 11);
  EXPECT_GT(allreduce[1], allreduce[0]);
  // The layout is kept in the profile; one without (an earlier build's) is row-major.
  Json j = to_json(p);
  EXPECT_EQ(j["layout"], "feature-major");
  EXPECT_EQ(profile_from_json(j, "x.json").layout, Layout::kFeatureMajor);
  j.erase("layout");
  EXPECT_EQ(profile_from_json(j, "x.json").layout, Layout::kRowMajor);
  j["layout"] = "column-major";
  EXPECT_THAT([&] { profile_from_json(j, "x.json"); },
              ::testing::ThrowsMessage<DataError>(HasSubstr("x.json: \"layout\" = \"column-major\" is not one of")));
}

// A profile measured at a K cut from the job's (job_K) predicts the job's shape unless told another:
// what the same profile predicts when asked for K = job_K.
TEST(SchemeProfile, ACutMinibatchPredictsTheJobsOwn) {
  SchemeProfile cut = dense_profile(1000, 500, 16);
  cut.job_K = 256;
  SchemeProfile asked = cut;
  asked.job_K = 0;
  Target t{8, cut.link, 1, false};
  EXPECT_EQ(target_shape(cut, t).K, 256);
  EXPECT_EQ(target_shape(asked, t).K, 16);
  for (const char* s : {"sfb", "halton", "allreduce", "fms:2"}) {
    const double job = predict(cut, parse_scheme(s), t).clock_s;
    Target at_K = t;
    at_K.shape = asked.shape();
    at_K.shape.K = 256;
    EXPECT_DOUBLE_EQ(job, predict(asked, parse_scheme(s), at_K).clock_s) << s;
    EXPECT_GT(job, predict(asked, parse_scheme(s), t).clock_s) << s;  // 16x the SF computation
    t.shape = cut.shape();                                            // asked for the measured K: that one
    EXPECT_DOUBLE_EQ(predict(cut, parse_scheme(s), t).clock_s, predict(asked, parse_scheme(s), t).clock_s) << s;
    t.shape = {};
  }
}

// The all-reduce engine's anchor: slower than its pieces, the difference as seconds per clock, so
// a larger K (more compute, the same W) or a larger W adds no more of it; faster, the ratio scales
// every piece.
// The SFB engine's excess over its pieces at the profile's N, and at two ranks (the pair run): the
// difference per peer is what each batch received adds, carried to SFB's N - 1 and Halton's Q.
TEST(SchemeProfile, TheEnginesExcessGrowsWithTheBatchesARankReceives) {
  SchemeProfile p = dense_profile(100, 50, 8);
  p.batch_bytes = 0;  // no broadcast: the pieces are SF computation and the apply
  p.link = Link{"fitted", 0.0, 0.001};
  const auto pieces = [&p](int n) { return p.sf_s + p.apply_fixed_s + n * p.apply_batch_s; };
  p.engine_clock_s = pieces(4) + 0.30;       // 0.30 s beyond the pieces at 4 ranks, 3 peers
  p.engine_pair_clock_s = pieces(2) + 0.10;  // 0.10 at 2 ranks, 1 peer: 0.10 s a peer
  const auto an = p.anchors();
  EXPECT_NEAR(an.sfb_s, 0.30, 1e-12);
  EXPECT_NEAR(an.sfb_per_peer_s, 0.10, 1e-12);
  const auto engine = [&p](const std::string& scheme, int nodes) {
    return predict(p, parse_scheme(scheme), Target{nodes, p.link, 1, true, p.shape()}).engine_s;
  };
  EXPECT_NEAR(engine("sfb", 4), 0.30, 1e-12);     // as measured
  EXPECT_NEAR(engine("sfb", 8), 0.70, 1e-12);     // 7 peers
  EXPECT_NEAR(engine("halton", 8), 0.30, 1e-12);  // Q = 3
  EXPECT_NEAR(engine("halton", 4), 0.20, 1e-12);  // Q = 2
  EXPECT_NEAR(engine("sfb", 2), 0.10, 1e-12);     // the pair's own
  // Slower at the pair than at 4 (noise): no growth, the excess as measured at every N.
  p.engine_pair_clock_s = pieces(2) + 0.40;
  EXPECT_EQ(p.anchors().sfb_per_peer_s, 0);
  EXPECT_NEAR(engine("sfb", 8), 0.30, 1e-12);
  // Not measured (fewer than 3 workers, an earlier build): the same.
  p.engine_pair_clock_s = 0;
  EXPECT_EQ(p.anchors().sfb_per_peer_s, 0);
  EXPECT_NEAR(engine("halton", 4), 0.30, 1e-12);
  // Never below 0: the 4-rank excess 0.05, the pair's -0.05 (its clock under its pieces), 0.05 a
  // peer, at 2 ranks 0.05 - 0.10.
  p.engine_clock_s = pieces(4) + 0.05;
  p.engine_pair_clock_s = pieces(2) - 0.05;
  EXPECT_NEAR(p.anchors().sfb_per_peer_s, 0.05, 1e-12);
  EXPECT_EQ(engine("sfb", 2), 0);
}

// On a rank of less than a core the clock is at least its SF computation, evaluations, apply and the
// broadcast's CPU for the 2 n B bytes it sends and receives, at its cores: where that is longer than
// the anchored sum, the CPU replaces the link's time and the engine's excess. The anchor stays
// exact at the profiled N; a core or more a rank, or a profile of an earlier build (no CPU
// measured), predicts as before.
TEST(SchemeProfile, ARankOfLessThanACoreIsBusyWithItsBroadcastsCpu) {
  SchemeProfile p = dense_profile(512, 512, 1024);
  p.reconcile = "";
  const double B = 1024 * (512 + 512) * 4;  // u and v of K pairs (no header)
  p.batch_bytes = static_cast<int64_t>(B);
  p.link = Link{"fitted", 0.0, 0.008};
  p.cores = 0.125;  // a host of an eighth of a core, one rank
  p.threads = 1;
  p.bcast_cpu_ns_per_byte = 0.75;
  const double wire = B * 8e-9;                // a batch to a peer on the wire
  const double cpu = 2 * B * 0.75e-9 / 0.125;  // a batch sent and one received, at an eighth of a core
  p.engine_clock_s = p.sf_s + p.apply_fixed_s + 4 * p.apply_batch_s + 3 * wire + 0.06;  // 0.06 s of excess
  const auto at = [&p](const std::string& scheme, int nodes, double cores) {
    Target t{nodes, p.link, 1, true, p.shape()};
    t.cores = cores;
    return predict(p, parse_scheme(scheme), t);
  };
  EXPECT_NEAR(p.anchors().sfb_s, 0.06, 1e-9);
  // The profile's 4 ranks: 3 peers' CPU (0.151 s) under the wire's and the excess (0.161 s). As measured.
  ASSERT_LT(3 * cpu, 3 * wire + 0.06);
  EXPECT_NEAR(at("sfb", 4, 0.125).clock_s, p.engine_clock_s, 1e-9);
  EXPECT_NEAR(at("sfb", 4, 0.125).engine_s, 0.06, 1e-9);
  // 8 ranks: 7 peers' CPU (0.352 s) over the wire's and the excess (0.295 s).
  const Prediction busy = at("sfb", 8, 0.125);
  EXPECT_NEAR(busy.comm_s, 7 * cpu, 1e-9);
  EXPECT_EQ(busy.engine_s, 0);
  EXPECT_NEAR(busy.clock_s, busy.compute_s + busy.update_s + 7 * cpu, 1e-9);
  EXPECT_NEAR(at("halton", 8, 0.125).comm_s, 3 * wire, 1e-9);  // Q = 3: as at 4 ranks
  // Halton to 5 peers is busy too; its reconciliation's all-reduce comes on top of the floor, as it
  // comes on top of the link's time without one.
  const Prediction h5 = at("halton:5", 8, 0.125);
  EXPECT_NEAR(h5.comm_s, 5 * cpu, 1e-9);
  p.reconcile = "mean";
  const double recon = at("halton:5", 8, 0.125).comm_s - h5.comm_s;
  EXPECT_GT(recon, 0);
  p.bcast_cpu_ns_per_byte = 0;
  EXPECT_NEAR(at("halton:5", 8, 0.125).comm_s, 5 * wire + recon, 1e-9);
  p.bcast_cpu_ns_per_byte = 0.75;
  p.reconcile = "";
  // A quarter of a core: half the CPU's time, under the anchored sum.
  EXPECT_NEAR(at("sfb", 8, 0.25).comm_s, 7 * wire, 1e-9);
  EXPECT_NEAR(at("sfb", 8, 0.25).engine_s, 0.06, 1e-9);
  // Nodes of 16 cores: the rank's threads have cores of their own, no floor.
  EXPECT_NEAR(at("sfb", 8, 16).comm_s, 7 * wire, 1e-9);
  // An engine faster than the floor at the profiled N (the CPU seconds overstate the cores'
  // share; 0.01 s beyond its pieces): the floor is divided by their ratio, and the profile's own N
  // is predicted as measured.
  const double pieces4 = p.sf_s + p.apply_fixed_s + 4 * p.apply_batch_s;
  p.engine_clock_s = pieces4 + 3 * wire + 0.01;
  const double k = (pieces4 + 3 * cpu) / p.engine_clock_s;
  ASSERT_GT(k, 1);
  EXPECT_NEAR(p.anchors().cpu_floor, k, 1e-9);
  EXPECT_NEAR(at("sfb", 4, 0.125).clock_s, p.engine_clock_s, 1e-9);
  const Prediction scaled = at("sfb", 8, 0.125);
  EXPECT_NEAR(scaled.clock_s, (scaled.compute_s + scaled.update_s + 7 * cpu) / k, 1e-9);
  EXPECT_GT(scaled.clock_s, scaled.compute_s + scaled.update_s + 7 * wire + 0.01);  // the floor is the longer
  EXPECT_EQ(scaled.engine_s, 0);
  // An earlier build's profile: the anchored sum alone.
  p.engine_clock_s = p.sf_s + p.apply_fixed_s + 4 * p.apply_batch_s + 3 * wire + 0.06;
  p.bcast_cpu_ns_per_byte = 0;
  EXPECT_EQ(p.anchors().cpu_floor, 1);
  EXPECT_NEAR(at("sfb", 8, 0.125).comm_s, 7 * wire, 1e-9);
  EXPECT_NEAR(at("sfb", 8, 0.125).engine_s, 0.06, 1e-9);
}

// Ranks sharing one machine's cores: the pair runs on ranks 0 and 1 while the others idle, so the
// two compute with the cores the idle ranks leave them, and the pair's pieces are the measured
// ones at those cores. Taken at the profile's own cores, a pair that ran exactly as its pieces at
// a core each would show a slope of what the halved pieces save, per peer.
TEST(SchemeProfile, ThePairsPiecesAreAtTheCoresTheIdleRanksLeaveIt) {
  SchemeProfile p = dense_profile(100, 50, 8);
  p.batch_bytes = 0;
  p.link = Link{"fitted", 0.0, 0.001};
  p.ranks_on_host = 4;  // mpirun -np 4 on a machine of 2 cores: half a core a rank
  p.cores = 2;
  p.threads = 1;
  const auto pieces = [&p](int n, double per_core) {
    return (p.sf_s + p.apply_fixed_s + n * p.apply_batch_s) * per_core;
  };
  p.engine_clock_s = pieces(4, 1.0) + 0.30;
  p.engine_pair_clock_s = pieces(2, 0.5) + 0.10;  // a core each: its pieces take half as long
  EXPECT_NEAR(p.anchors().sfb_s, 0.30, 1e-12);
  EXPECT_NEAR(p.anchors().sfb_per_peer_s, 0.10, 1e-12);
  // Two ranks to a host of their own each (the netns cluster): the pair had what every rank had.
  p.ranks_on_host = 1;
  p.cores = 0.5;
  EXPECT_NEAR(p.anchors().sfb_per_peer_s, (0.30 - 0.10 + pieces(2, 0.5)) / 2, 1e-12);
  // Two threads a rank on 2 cores shared by 4 ranks: still half a core each at 4, a core at the pair.
  p.ranks_on_host = 4;
  p.cores = 2;
  p.threads = 2;
  EXPECT_NEAR(p.anchors().sfb_per_peer_s, 0.10, 1e-12);
  // Capped by the threads: 4 ranks of 1 thread on 4 cores compute with a core each, the pair too.
  const double unchanged = (0.30 - 0.10 + pieces(2, 0.5)) / 2;
  p.cores = 4;
  p.threads = 1;
  EXPECT_NEAR(p.anchors().sfb_per_peer_s, unchanged, 1e-12);
  // Two ranks a host, a core each: the pair is the host's two ranks, as at every N.
  p.ranks_on_host = 2;
  p.cores = 2;
  EXPECT_NEAR(p.anchors().sfb_per_peer_s, unchanged, 1e-12);
}

TEST(SchemeProfile, TheDenseAnchorCarriesWhatTheEngineAddsAsSecondsPerClock) {
  const DenseAnchor slow = dense_anchor(0.9, 0.5);
  EXPECT_DOUBLE_EQ(slow.ratio, 1.0);
  EXPECT_DOUBLE_EQ(slow.s, 0.4);
  const DenseAnchor fast = dense_anchor(0.4, 0.5);
  EXPECT_DOUBLE_EQ(fast.ratio, 0.8);
  EXPECT_DOUBLE_EQ(fast.s, 0.0);
  EXPECT_DOUBLE_EQ(dense_anchor(0, 0.5).ratio, 1.0);  // not measured
  EXPECT_DOUBLE_EQ(dense_anchor(0, 0.5).s, 0.0);
  SchemeProfile p = dense_profile(1000, 500, 16);
  p.allreduce_a_us = 100;  // the all-reduce fitted at the profile's N
  p.allreduce_b_us_per_byte = 0.01;
  const Target here{4, p.link, 1, true};
  const double pieces = predict(p, Scheme::allreduce(), here).clock_s;
  p.engine_allreduce_clock_s = pieces + 0.25;  // the engine takes 0.25 s a clock more than its pieces
  EXPECT_NEAR(predict(p, Scheme::allreduce(), here).clock_s, pieces + 0.25, 1e-12);
  EXPECT_NEAR(predict(p, Scheme::allreduce(), here).engine_s, 0.25, 1e-12);
  SchemeProfile alone = p;
  alone.engine_allreduce_clock_s = 0;
  for (const auto& [J, K] : {std::pair<int64_t, int64_t>{1000, 1024}, {8000, 16}}) {
    Target other = here;
    other.nodes = 8;
    other.shape = p.shape();
    other.shape.J = J;
    other.shape.K = K;
    EXPECT_NEAR(predict(p, Scheme::allreduce(), other).clock_s,
                predict(alone, Scheme::allreduce(), other).clock_s + 0.25, 1e-9)
        << J << " " << K;
  }
}

// The all-reduce in the engine's calls: its blocks (a first eighth of one, then whole ones), each
// call the fit's start-up A, A growing as N - 1 at another N and B as the bytes a rank sends; a
// profile of an earlier build (no allreduce_block_bytes) predicts one whole-W call, as it did.
TEST(SchemeProfile, TheAllreduceIsItsEnginesCalls) {
  // The engine's cuts and the predictor's count agree, whatever the shape.
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {2048, 2048}, {1, 1}, {7, 3}, {50000, 20000}, {100, 1 << 22}, {1 << 20, 1}, {300, 1000}}) {
    const auto cuts = dense_allreduce_cuts(rows, cols);
    EXPECT_EQ(dense_allreduce_calls(rows, cols), static_cast<int64_t>(cuts.size())) << rows << " x " << cols;
    int64_t next = 0;
    for (const auto& [r0, n] : cuts) {
      EXPECT_EQ(r0, next);
      EXPECT_GE(n, 1);
      next += n;
    }
    EXPECT_EQ(next, rows);
  }
  const auto cuts = dense_allreduce_cuts(2048, 2048);  // W = 16 MiB: 128-row (1 MiB) blocks, the first 16
  ASSERT_EQ(cuts.size(), 17u);
  EXPECT_EQ(cuts[0].second, 16);
  EXPECT_EQ(cuts[1].second, 128);
  EXPECT_EQ(cuts.back().second, 2048 - 16 - 15 * 128);
  EXPECT_EQ(reconcile_calls(2048, 2048), 16 + 1);  // 1 MiB blocks and the drift's float

  SchemeProfile p = dense_profile(2048, 2048, 16);
  p.link = {"fitted", 500, 0.008};
  p.allreduce_a_us = 4000;
  p.allreduce_b_us_per_byte = 0.012;  // 2 (P - 1) / P = 1.5 of the link's 0.008
  p.allreduce_block_bytes = 1 << 20;
  const double W = 16 << 20;
  EXPECT_NEAR(p.allreduce_s(16 << 20, 17, 4), (17 * 4000 + 0.012 * W) * 1e-6, 1e-12);
  EXPECT_NEAR(p.allreduce_s(16 << 20, 1, 4), (4000 + 0.012 * W) * 1e-6, 1e-12);
  // 8 ranks: A 7 / 3 as large, B 1.75 / 1.5.
  EXPECT_NEAR(p.allreduce_s(16 << 20, 17, 8), (17 * 4000 * 7 / 3.0 + 0.012 * 1.75 / 1.5 * W) * 1e-6, 1e-12);
  // The all-reduce scheme's network is the engine's calls at the target, on the fitted link.
  const Target eight{8, p.link, 1, true};
  EXPECT_NEAR(predict(p, Scheme::allreduce(), eight).comm_s, p.allreduce_s(16 << 20, 17, 8) * p.anchors().dense.ratio,
              1e-12);
  SchemeProfile old = p;
  old.allreduce_block_bytes = 0;  // an earlier build's fit at W / 4 and W: whole-W calls
  EXPECT_NEAR(old.allreduce_s(16 << 20, 17, 4), (4000 + 0.012 * W) * 1e-6, 1e-12);
  const LinkCost c = link_cost_from_fit(4000, 0.012, 4);
  EXPECT_NEAR(old.allreduce_s(16 << 20, 17, 8), (2 * c.a_us + 2 * 7 / 8.0 * W * c.b_us_per_byte) * 1e-6, 1e-12);
  Json j = to_json(p);
  EXPECT_EQ(profile_from_json(j, "x.json").allreduce_block_bytes, 1 << 20);
  j.erase("allreduce_block_bytes");
  EXPECT_EQ(profile_from_json(j, "x.json").allreduce_block_bytes, 0);
}

// The profile's budget: the minibatch it measures at and the repeats that fit.
TEST(SchemeProfiler, TheBudgetCutsTheMinibatchAndTheRepeats) {
  using profiler::kSfPerBudget;
  using profiler::profiled_minibatch;
  // One SF computation of 16 samples took 0.16 s: 0.6 s of a 60 s budget is 60 samples.
  EXPECT_DOUBLE_EQ(kSfPerBudget, 100);
  EXPECT_EQ(profiled_minibatch(4096, 16, 0.16, 60), 60);
  EXPECT_EQ(profiled_minibatch(50, 16, 0.16, 60), 50);     // fits: the job's own
  EXPECT_EQ(profiled_minibatch(16, 16, 100.0, 60), 16);    // nothing smaller was probed
  EXPECT_EQ(profiled_minibatch(4096, 16, 0.16, 1e-6), 1);  // at least one sample
  EXPECT_EQ(profiled_minibatch(4096, 16, 0.0, 60), 4096);  // no measurement: nothing to cut by
  EXPECT_EQ(profiler::repeats_within(3, 1.0, 10.0), 3);
  EXPECT_EQ(profiler::repeats_within(3, 1.0, 2.5), 2);
  EXPECT_EQ(profiler::repeats_within(3, 1.0, 0.1), 1);  // always one
  EXPECT_EQ(profiler::repeats_within(3, 0.0, 0.1), 3);
  // The SF computation's part that does not grow with K, from K and K / 2: 0.040 s at 32 samples
  // and 0.029 at 16 leave 0.018 s; a slope steeper than proportional none; a flat one all of it.
  EXPECT_NEAR(profiler::sf_fixed_seconds(0.040, 0.029, 32), 0.018, 1e-12);
  EXPECT_NEAR(profiler::sf_fixed_seconds(0.040, 0.029, 33), 0.040 - 0.011 / 17 * 33, 1e-12);
  EXPECT_EQ(profiler::sf_fixed_seconds(0.040, 0.010, 32), 0);
  EXPECT_EQ(profiler::sf_fixed_seconds(0.040, 0.050, 32), 0.040);
  EXPECT_EQ(profiler::sf_fixed_seconds(0.040, 0.030, 1), 0);
}

// sfbd --profile on `ranks` in-process ranks, the first `workers` of them workers and the rest
// FMS's servers (on worker 0's partition): every rank's profile.
std::vector<Json> profile_in_process(const Config& cfg, int ranks, int workers, double budget_s = 60,
                                     bool tcp = false) {
  std::vector<Json> got(static_cast<size_t>(ranks));
  const auto rank = [&](comm::Transport& t) {
    const int part = t.rank() < workers ? t.rank() : 0;
    const auto data = io::load_data(cfg.data, cfg.job.seed, part, workers, false);
    auto model = models::make_model(cfg, data.train, data.total_train, part, workers);
    profiler::ProfileRequest req;
    req.cfg = &cfg;
    req.transport = &t;
    req.model = model.get();
    req.train = &data.train;
    req.workers = workers;
    req.budget_s = budget_s;
    req.ranks_on_host = ranks;  // what MPI counts on one host: the servers too
    got[static_cast<size_t>(t.rank())] = to_json(profiler::measure_scheme_profile(req));
  };
  if (tcp)
    testing::run_tcp_ranks(ranks, rank);
  else
    testing::run_ranks(ranks, rank);
  return got;
}

// Over TCP the engine's communication thread waits for messages instead of polling: the profile
// measures the broadcast's CPU a byte (that thread's and the I/O thread's over the bytes). In
// process the thread polls, and the profile says unknown (MeasuresOnTheInProcessTransport).
TEST(SchemeProfiler, MeasuresTheBroadcastsCpuWhereTheTransportWaits) {
  Config cfg = testing::quiet_synthetic(255, 64, 900, 0);
  cfg.optimizer.minibatch = 32;
  cfg.eval.every = 0;
  const std::vector<Json> got = profile_in_process(cfg, 3, 3, 60, /*tcp=*/true);
  EXPECT_EQ(got[0], got[2]);
  const SchemeProfile p = profile_from_json(got[0], "rank 0");
  ASSERT_GT(p.engine_clock_s, 0);
  EXPECT_GT(p.bcast_cpu_ns_per_byte, 0);
  EXPECT_LT(p.bcast_cpu_ns_per_byte, 1e3);
}

// The profiler on 3 workers and 1 FMS server in process: the workers measure among themselves,
// then the FMS engine with the server working, then again with rank 0's monitor evaluating (the
// server serves a second run); the server returns no profile. With 2 servers and no evaluations
// the engine runs once and both servers are released.
TEST(SchemeProfiler, MeasuresTheFmsEngineWithItsServers) {
  for (const int servers : {1, 2}) {
    Config cfg = testing::quiet_synthetic(255, 64, 900, 0);
    cfg.optimizer.minibatch = 32;
    cfg.comm.scheme = sfb::Scheme::kFms;
    cfg.fms.servers = servers;
    if (servers == 2) cfg.eval.every = 0;
    const std::vector<Json> got = profile_in_process(cfg, 3 + servers, 3);
    ASSERT_EQ(got.size(), static_cast<size_t>(3 + servers));
    EXPECT_EQ(got[0], got[1]) << servers;
    EXPECT_EQ(got[0], got[2]) << servers;
    for (int s = 3; s < 3 + servers; ++s) EXPECT_EQ(got[static_cast<size_t>(s)]["workers"], 0) << servers;
    const SchemeProfile p = profile_from_json(got[0], "rank 0");
    EXPECT_EQ(p.workers, 3) << servers;
    // The workers share this machine among themselves: the servers, which MPI counts on the host too
    // (ProfileRequest::ranks_on_host), wait while they measure and are not counted. Every server ran
    // on a worker's machine.
    EXPECT_EQ(p.ranks_on_host, 3) << servers;
    EXPECT_EQ(p.engine_fms_servers_beside, servers);
    EXPECT_GT(p.engine_clock_s, 0) << servers;
    EXPECT_GT(p.engine_allreduce_clock_s, 0) << servers;
    EXPECT_GT(p.engine_fms_clock_s, 0) << servers;
    EXPECT_EQ(p.engine_fms_servers, servers);
    if (servers == 2) {
      EXPECT_EQ(p.engine_fms_eval_clock_s, 0);  // no evaluations: no second run
      continue;
    }
    EXPECT_GT(p.engine_fms_eval_clock_s, 0);
    EXPECT_GT(p.engine_fms_clock_se_s, 0);
    EXPECT_GT(p.engine_fms_eval_clock_se_s, 0);
    // At the profile FMS with its servers is predicted at what its engine measured, plus what the
    // evaluations cost it: their pieces times the second run's excess over them.
    const Prediction at = predict(p, parse_scheme("fms:1"), {3, p.link, p.ranks_on_host, true});
    const double ev = (p.eval_s + p.eval_copy_s + p.eval_sketch_s) / static_cast<double>(p.eval_every);
    const double excess = std::max(0.0, p.engine_fms_eval_clock_s - p.engine_fms_clock_s);
    EXPECT_NEAR(at.clock_s, p.engine_fms_clock_s + excess, 1e-9 * at.clock_s + 1e-12 * ev);
  }
}

// sfbd --profile on 3 workers and 1 FMS server in process, worker 2's transport wrapped by
// FaultyTransport with `fault`: what each rank's profile threw ("" when it returned).
std::vector<std::string> fms_profile_errors(const Config& cfg, const comm::FaultSpec& fault) {
  constexpr int kRanks = 4, kWorkers = 3;
  auto group = comm::make_inproc_group(kRanks);
  group[2] = std::make_unique<comm::FaultyTransport>(std::move(group[2]), fault);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      const int part = r < kWorkers ? r : 0;
      try {
        const auto data = io::load_data(cfg.data, cfg.job.seed, part, kWorkers, false);
        auto model = models::make_model(cfg, data.train, data.total_train, part, kWorkers);
        profiler::ProfileRequest req;
        req.cfg = &cfg;
        req.transport = group[static_cast<size_t>(r)].get();
        req.model = model.get();
        req.train = &data.train;
        req.workers = kWorkers;
        profiler::measure_scheme_profile(req);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// A worker lost in the middle of FMS's profile, once the workers have measured among themselves:
// dead at its first message to the server (its transport throws from then on), or stopped there
// (its messages to the server lost without an error). Every rank ends with an error and none
// returns a profile or waits for ever (the peer timeout; ctest's timeout would catch a hang): the
// dead worker's own, the other workers' on the engine's peers, and the server's naming the
// worker whose push it lacks (on its peer timeout, or on worker 0's word that no run follows
// arriving in the middle of the run). A healthy profile at the same short peer timeout completes:
// the servers wait for the workers' own measurements within the budget, not the peer timeout.
TEST(SchemeProfiler, AWorkerLostInTheFmsEngineEndsEveryRankWithAnError) {
  Config cfg = testing::quiet_synthetic(255, 64, 900, 0);
  cfg.optimizer.minibatch = 32;
  cfg.comm.scheme = sfb::Scheme::kFms;
  cfg.fms.servers = 1;
  cfg.runtime.peer_timeout_s = 2.0;
  const std::vector<std::string> healthy = fms_profile_errors(cfg, {});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(healthy[static_cast<size_t>(r)], "") << "rank " << r;
  comm::FaultSpec dead;
  dead.tag = comm::kTagPs;
  dead.kill_at_send = 0;
  comm::FaultSpec stopped;
  stopped.tag = comm::kTagPs;
  stopped.silent_from = 0;
  for (const auto& [name, fault] : {std::pair{"dead", dead}, std::pair{"stopped", stopped}}) {
    const std::vector<std::string> errors = fms_profile_errors(cfg, fault);
    for (int r : {0, 1}) EXPECT_THAT(errors[static_cast<size_t>(r)], HasSubstr("is it alive?")) << name;
    if (std::string(name) == "dead")
      EXPECT_THAT(errors[2], HasSubstr("rank 2: injected failure: transport killed at send 0"));
    else
      EXPECT_THAT(errors[2], HasSubstr("is it alive?"));
    EXPECT_THAT(errors[3], HasSubstr("server rank 3: ")) << name;
    EXPECT_THAT(errors[3], HasSubstr("waiting for workers 2 (block 0 of clock 0)")) << name;
  }
}

// The profiler on 3 in-process ranks: one profile, the same on every rank, with the batch's real
// encoded size and positive link and update costs.
TEST(SchemeProfiler, MeasuresOnTheInProcessTransport) {
  Config cfg = testing::quiet_synthetic(255, 64, 900, 0);
  cfg.optimizer.minibatch = 32;
  cfg.eval.every = 5;
  const std::vector<Json> got = profile_in_process(cfg, 3, 3);
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(got[0], got[2]);
  const SchemeProfile p = profile_from_json(got[0], "rank 0");
  EXPECT_EQ(p.J, 64);
  EXPECT_EQ(p.D, 256);
  EXPECT_EQ(p.batch_bytes, 32 * (64 + 256) * 4 + 56);  // u and v of 32 pairs and the 56-byte head
  EXPECT_GT(p.sf_s, 0);
  EXPECT_GE(p.sf_fixed_s, 0);  // timed at K / 2 too (dense v)
  EXPECT_LE(p.sf_fixed_s, p.sf_s);
  EXPECT_GT(p.apply_fixed_s + p.apply_batch_s, 0);
  EXPECT_GT(p.form_dense_s, 0);
  EXPECT_GT(p.link.b_us_per_byte, 0);
  EXPECT_EQ(p.bcast_cpu_ns_per_byte, 0);  // the in-process transport cannot wait: the engine polled, unknown
  EXPECT_GT(p.allreduce_b_us_per_byte, 0);
  EXPECT_GE(p.ranks_on_host, 3);           // three threads of this process: one machine
  EXPECT_EQ(p.layout, Layout::kRowMajor);  // the model's (MLR on dense data)
  // The engine ran: its clock, compute and apply, and anchors from them.
  EXPECT_GT(p.engine_clock_s, 0);
  EXPECT_GT(p.engine_sf_s, 0);
  EXPECT_GT(p.engine_apply_s, 0);
  EXPECT_GT(p.engine_allreduce_clock_s, 0);
  EXPECT_GT(p.incast_b_us_per_byte, 0);
  EXPECT_GT(p.mem_bytes_per_s, 0);
  EXPECT_GT(p.profile_s, 0);
  // The evaluation (eval.every of the config), its copy and a drift sketch were timed.
  EXPECT_EQ(p.eval_every, cfg.eval.every);
  EXPECT_GT(p.eval_s, 0);
  EXPECT_GT(p.eval_copy_s, 0);
  EXPECT_GT(p.eval_sketch_s, 0);
  EXPECT_GT(p.engine_eval_clock_s, 0);            // the SFB engine again with the monitor evaluating
  EXPECT_GT(p.engine_pair_clock_s, 0);            // and on two of the three ranks
  EXPECT_GT(p.engine_allreduce_eval_clock_s, 0);  // and the all-reduce's
  // Each run's standard error, from its clocks (at least 4, 2 of them steady).
  for (const double se : {p.engine_clock_se_s, p.engine_eval_clock_se_s, p.engine_allreduce_clock_se_s,
                          p.engine_allreduce_eval_clock_se_s}) {
    EXPECT_GT(se, 0);
    EXPECT_LT(se, std::max(p.engine_clock_s, p.engine_allreduce_eval_clock_s));
  }
  EXPECT_GE(p.anchors().sfb_s, 0);
  EXPECT_GT(p.anchors().dense.ratio, 0);
  EXPECT_GE(p.anchors().dense.s, 0);
}

// A budget too small for anything: the profile measures at K = 1 (job_K the job's), one repeat of
// each size, no engine (none fits), and still predicts the job's shape; with the servers too.
TEST(SchemeProfiler, KeepsToItsBudgetByMeasuringASmallerMinibatch) {
  Config cfg = testing::quiet_synthetic(255, 64, 900, 0);
  cfg.optimizer.minibatch = 32;
  for (const int servers : {0, 1}) {
    if (servers > 0) {
      cfg.comm.scheme = sfb::Scheme::kFms;
      cfg.fms.servers = servers;
      cfg.model.layout = "feature-major";  // recorded as the model stores W
    }
    const std::vector<Json> got = profile_in_process(cfg, 3 + servers, 3, 1e-6);
    EXPECT_EQ(got[0], got[2]);
    const SchemeProfile p = profile_from_json(got[0], "rank 0");
    EXPECT_EQ(p.K, 1) << servers;
    EXPECT_EQ(p.job_K, 32) << servers;
    EXPECT_EQ(p.batch_bytes, (64 + 256) * 4 + 56) << servers;  // one pair
    EXPECT_EQ(p.engine_clock_s, 0) << servers;
    EXPECT_EQ(p.engine_allreduce_clock_s, 0) << servers;
    EXPECT_EQ(p.engine_fms_clock_s, 0) << servers;
    EXPECT_EQ(p.engine_allreduce_eval_clock_s, 0) << servers;
    EXPECT_EQ(p.engine_fms_eval_clock_s, 0) << servers;
    // The engines it left out, by name: sfbd --profile refuses it without --partial-profile.
    std::vector<std::string> skipped{"the SFB engine", "the all-reduce engine"};
    if (servers > 0) skipped.emplace_back("the FMS engine");
    EXPECT_EQ(p.skipped, skipped) << servers;
    EXPECT_GT(p.sf_s, 0) << servers;
    EXPECT_EQ(p.sf_fixed_s, 0) << servers;  // K = 1: nothing to tell apart
    EXPECT_GT(p.link.b_us_per_byte, 0) << servers;
    EXPECT_EQ(target_shape(p, {3, p.link, 1, true}).K, 32) << servers;
    EXPECT_EQ(p.layout, servers > 0 ? Layout::kFeatureMajor : Layout::kRowMajor) << servers;
  }
}

}  // namespace
}  // namespace sfb::predict
