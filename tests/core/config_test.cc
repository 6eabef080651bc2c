#include "sfb/core/config.h"

#include <fstream>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"

namespace sfb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const char* kBase = R"(
[data]
format = "synthetic"
features = 10
classes = 3
)";

std::string error_of(const std::string& text, std::vector<std::string> overrides = {}) {
  try {
    parse_config(text, "job.toml", overrides);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsAndValues) {
  const Config c =
      parse_config(std::string(kBase) + "[sfb]\nstaleness = 3\n[optimizer]\nlr = 1\nminibatch = 8\n", "job.toml");
  EXPECT_EQ(c.sfb.staleness, 3);
  EXPECT_EQ(c.sfb.consistency_name(), "SSP(s=3)");
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 1.0);  // an integer is accepted for a float key
  EXPECT_EQ(c.optimizer.minibatch, 8);
  EXPECT_EQ(c.stop.max_clocks, Config{}.stop.max_clocks);
}

TEST(Config, StalenessInfIsAsp) {
  const Config c = parse_config(std::string(kBase) + "[sfb]\nstaleness = \"inf\"\n", "job.toml");
  EXPECT_TRUE(c.sfb.asp());
  EXPECT_EQ(c.sfb.consistency_name(), "ASP");
  EXPECT_EQ(parse_config(kBase, "job.toml").sfb.consistency_name(), "BSP");
}

TEST(Config, NegativeStalenessNamesLineAndAcceptedValues) {
  const auto e = error_of(std::string(kBase) + "[sfb]\nstaleness = -3\n");
  EXPECT_THAT(e, HasSubstr("job.toml:7: sfb.staleness must be 0 to 2^53 or \"inf\", got -3"));
}

TEST(Config, UnknownKeyNamesLineAndKnownKeys) {
  const auto e = error_of(std::string(kBase) + "[optimizer]\nlearning_rate = 0.1\n");
  EXPECT_THAT(e, HasSubstr("job.toml:7: unknown key 'optimizer.learning_rate'"));
  EXPECT_THAT(e, HasSubstr("lr"));
}

TEST(Config, UnknownSectionIsAnError) {
  EXPECT_THAT(error_of(std::string(kBase) + "[optimiser]\nlr = 0.1\n"),
              HasSubstr("job.toml:6: unknown section 'optimiser'"));
}

TEST(Config, WrongTypeNamesLine) {
  EXPECT_THAT(error_of(std::string(kBase) + "[optimizer]\nminibatch = \"big\"\n"),
              HasSubstr("job.toml:7: optimizer.minibatch must be an integer"));
  EXPECT_THAT(error_of(std::string(kBase) + "[optimizer]\nminibatch = 0\n"),
              HasSubstr("job.toml:7: optimizer.minibatch must be in [1,"));
}

TEST(Config, ChoiceListsAcceptedValues) {
  EXPECT_THAT(error_of(std::string(kBase) + "[model]\nname = \"svm\"\n"),
              HasSubstr("model.name must be one of \"mlr\", \"l2mlr\", \"dml\", \"sparse_coding\", got \"svm\""));
}

TEST(Config, SyntaxErrorNamesLine) {
  EXPECT_THAT(error_of(std::string(kBase) + "[sfb\n"), HasSubstr("job.toml:6: TOML syntax error"));
}

TEST(Config, OverridesApplyAndAreNamedInErrors) {
  const Config c = parse_config(kBase, "job.toml", {"sfb.staleness=inf", "optimizer.lr=0.5", "output.dir=/tmp/x"});
  EXPECT_TRUE(c.sfb.asp());
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.5);
  EXPECT_EQ(c.output.dir, "/tmp/x");
  EXPECT_THAT(
      error_of(kBase, {"optimizer.lr=-1"}),
      HasSubstr("--set optimizer.lr=-1: optimizer.lr must be a number in [1e-12, 1000000] or \"auto\", got -1"));
  EXPECT_THAT(error_of(kBase, {"optimizer.typo=1"}), HasSubstr("--set optimizer.typo=1: unknown key"));
  EXPECT_THAT(error_of(kBase, {"nonsense"}), HasSubstr("expected key=value"));
}

TEST(Config, RecordsItsOverridesAndEveryResolvedSetting) {
  const Config c = parse_config(kBase, "job.toml", {"optimizer.lr=0.5", "sfb.staleness=inf"});
  EXPECT_THAT(c.overrides, ElementsAre("optimizer.lr=0.5", "sfb.staleness=inf"));
  const auto s = c.settings();
  const auto value = [&](const std::string& key) {
    for (const auto& [k, v] : s)
      if (k == key) return v;
    return std::string("<missing>");
  };
  EXPECT_EQ(value("optimizer.lr"), "0.5");
  EXPECT_EQ(value("sfb.staleness"), "\"inf\"");
  EXPECT_EQ(value("job.seed"), fmt::format("{}", c.job.seed));
  EXPECT_EQ(s.size(), config_key_docs().size());  // every key of the schema, once
}

TEST(Config, RelativePluginPathsInTheFileAreRelativeToTheFile) {
  const std::string text = std::string(kBase) + "[model]\nplugin = \"../lib/m.so\"\n";
  EXPECT_EQ(parse_config(text, "/jobs/a/job.toml", {}).model.plugin, "/jobs/lib/m.so");
  EXPECT_EQ(parse_config(text, "job.toml", {}).model.plugin, "../lib/m.so");  // the working directory's
  // --set keeps the working directory, and an absolute path stays as it is.
  EXPECT_EQ(parse_config(text, "/jobs/a/job.toml", {"model.plugin=x/m.so"}).model.plugin, "x/m.so");
  EXPECT_EQ(parse_config(kBase, "/jobs/a/job.toml", {"model.plugin=/opt/m.so"}).model.plugin, "/opt/m.so");
}

TEST(Config, BuiltInModelKeysWithAPluginAreAnErrorNamingWhereTheyWereSet) {
  const std::string text = std::string(kBase) + "[model]\nplugin = \"/opt/m.so\"\n";
  EXPECT_NO_THROW(parse_config(text, "job.toml", {"model.params.lambda=10"}));
  try {
    parse_config(text, "job.toml", {"model.lambda=10"});
    ADD_FAILURE() << "model.lambda with a plugin was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("--set model.lambda=10: model.lambda is a key of the built-in models"));
    EXPECT_THAT(e.what(), HasSubstr("model.params.lambda"));
  }
  try {
    parse_config(text + "atoms = 3\n", "job.toml", {});
    ADD_FAILURE() << "model.atoms with a plugin was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("job.toml:"));
    EXPECT_THAT(e.what(), HasSubstr("model.atoms is a key of the built-in models"));
  }
}

TEST(Config, CrossFieldRules) {
  EXPECT_THAT(error_of("[data]\nformat = \"libsvm\"\n"), HasSubstr("\"libsvm\" needs data.train"));
  EXPECT_THAT(error_of("[data]\nformat = \"libsvm\"\ntrain = \"x\"\nclasses = 1\n"),
              HasSubstr("data.classes = 1: a classifier needs 2 classes or more"));
  EXPECT_THAT(error_of("[data]\nformat = \"idx\"\n"), HasSubstr("needs data.train_images"));
}

TEST(Config, FingerprintFollowsValuesButNotOutputPaths) {
  const Config a = parse_config(kBase, "a.toml");
  EXPECT_EQ(a.fingerprint(), parse_config(kBase, "b.toml", {"output.dir=elsewhere"}).fingerprint());
  EXPECT_NE(a.fingerprint(), parse_config(kBase, "a.toml", {"sfb.staleness=1"}).fingerprint());
}

TEST(Config, LoadFileMissingNamesFile) {
  try {
    load_config("/nonexistent/job.toml");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/job.toml"));
  }
}

TEST(Config, EveryKeyIsDocumented) {
  for (const auto& k : config_key_docs()) {
    EXPECT_FALSE(k.help.empty()) << k.key;
    EXPECT_FALSE(k.default_value.empty()) << k.key;
  }
}

}  // namespace
}  // namespace sfb

namespace sfb {
namespace {

TEST(Config, ReadmeDocumentsEveryKeyWithItsDefault) {
  std::ifstream in(std::string(SFB_SOURCE_DIR) + "/configs/README.md");
  ASSERT_TRUE(in.good());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& k : config_key_docs())
    EXPECT_NE(text.find(fmt::format("| `{}` | {} | {} | `{}` |", k.key, k.mode.empty() ? "both" : k.mode, k.type,
                                    k.default_value)),
              std::string::npos)
        << k.key << " is missing or stale in configs/README.md (regenerate with sfbd --keys)";
}

TEST(Config, ShippedConfigsAreValid) {
  for (const char* name : {"fashion_mlr.toml", "test_fashion_small.toml", "synthetic_sparse.toml", "large_mlr.toml"})
    EXPECT_NO_THROW(load_config(std::string(SFB_SOURCE_DIR) + "/configs/" + name)) << name;
}

TEST(Config, TheResolvedTomlLoadsBackIntoTheSameConfig) {
  const Config c = parse_config(std::string(kBase) + "[sfb]\nstaleness = \"inf\"\n[model.params]\nalpha = 0.5\n",
                                "job.toml", {"optimizer.lr=0.25", "output.dir=\"runs/a b\""});
  const std::string text = c.resolved_toml();
  EXPECT_THAT(text, HasSubstr("--set optimizer.lr=0.25"));
  const Config back = parse_config(text, "resolved.toml");
  EXPECT_EQ(back.fingerprint(), c.fingerprint());
  EXPECT_EQ(back.settings(), c.settings());
  const Config p = parse_config(std::string(kBase) + "[model]\nplugin = \"/opt/m.so\"\n", "job.toml");
  EXPECT_EQ(parse_config(p.resolved_toml(), "resolved.toml").fingerprint(), p.fingerprint());
}

TEST(Config, MaxEpochsLimitsTheClocks) {
  StopConfig s;
  s.max_clocks = 1000;
  EXPECT_EQ(s.clock_limit(60000, 4 * 64), 1000);  // off
  s.max_epochs = 1;
  EXPECT_EQ(s.clock_limit(60000, 4 * 64), 235);  // ceil(60000 / 256)
  s.max_epochs = 0.5;
  EXPECT_EQ(s.clock_limit(60000, 4 * 64), 118);
  s.max_epochs = 1e-9;
  EXPECT_EQ(s.clock_limit(60000, 4 * 64), 1);  // at least one clock
  s.max_epochs = 100;
  EXPECT_EQ(s.clock_limit(60000, 4 * 64), 1000);  // never beyond max_clocks
  EXPECT_EQ(parse_config(std::string(kBase) + "[stop]\nmax_epochs = 2.5\n", "job.toml").stop.max_epochs, 2.5);
}

// The schema marks the keys one mode reads (sfb_mode, cnn_mode, built_in_model in config.cc): every
// marked key, set to its own default in the other mode, is refused naming the key; unmarked keys
// load in both; a built-in model's key is refused with model.plugin.
TEST(Config, EachModeRefusesTheKeysTheSchemaMarksForTheOther) {
  int sfb_only = 0, cnn_only = 0, built_in = 0;
  for (const auto& k : config_key_docs()) {
    const std::string set = k.key + "=" + k.default_value;
    const std::string sfb_job = std::string(kBase), cnn_job = std::string(kBase) + "[job]\nmode = \"mgwfbp\"\n";
    if (k.key == "job.mode") continue;
    if (k.mode == "sfb") {
      ++sfb_only;
      EXPECT_THAT(error_of(cnn_job, {set}), HasSubstr(k.key + " is not used by job.mode = \"mgwfbp\"")) << k.key;
    } else if (k.mode == "mgwfbp") {
      ++cnn_only;
      EXPECT_THAT(error_of(sfb_job, {set}), HasSubstr(k.key + " is not used by job.mode = \"sfb\"")) << k.key;
    } else {
      EXPECT_THAT(error_of(sfb_job, {set}), Not(HasSubstr("is not used by job.mode"))) << k.key;
      EXPECT_THAT(error_of(cnn_job, {set}), Not(HasSubstr("is not used by job.mode"))) << k.key;
    }
    if (k.key.starts_with("model.") && k.mode == "sfb" && k.key != "model.plugin") {
      const std::string e = error_of(sfb_job + "[model]\nplugin = \"/opt/m.so\"\n", {set});
      if (e.find("is a key of the built-in models") != std::string::npos) ++built_in;
    }
  }
  EXPECT_GE(sfb_only, 30);
  EXPECT_GE(cnn_only, 10);
  EXPECT_EQ(built_in, 12) << "model.name .. model.lasso_steps, model.C";
  EXPECT_THAT(error_of(std::string(kBase) + "[job]\nmode = \"mgwfbp\"\n", {"model.params.alpha=1"}),
              HasSubstr("model.params is not used by job.mode = \"mgwfbp\""));
}

}  // namespace
}  // namespace sfb
