// Config parsing, --set overrides, and the invalid-config corpus (tests/plan/invalid_configs:
// every file's first line is "# expect: <substring of the error message>").
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/plan/Config.h"
#include "core/plan/ConfigFields.h"

namespace stagescope::plan {
namespace {

namespace fs = std::filesystem;

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string errorOf(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parseConfig(text, "t.toml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

std::vector<std::string> invalidConfigs() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(STAGESCOPE_INVALID_DIR)) {
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class InvalidConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(InvalidConfig, FailsWithExpectedOneLineMessage) {
  fs::path path = fs::path(STAGESCOPE_INVALID_DIR) / (GetParam() + ".toml");
  std::string text = readFile(path);
  const std::string prefix = "# expect: ";
  ASSERT_EQ(text.rfind(prefix, 0), 0u) << path << " lacks a first-line '# expect: ' comment";
  std::string expected = text.substr(prefix.size(), text.find('\n') - prefix.size());
  try {
    loadConfig(path.string());
    FAIL() << path << " was accepted; expected an error containing: " << expected;
  } catch (const ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(expected), std::string::npos)
        << "message: " << what << "\nexpected to contain: " << expected;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "message is not one line: " << what;
    EXPECT_EQ(what.rfind(path.string(), 0), 0u) << "message does not start with the file name";
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, InvalidConfig, ::testing::ValuesIn(invalidConfigs()),
                         [](const auto& info) { return info.param; });

TEST(InvalidConfigCorpus, HasAtLeastThirtyFiles) {
  EXPECT_GE(invalidConfigs().size(), 30u);
}

std::vector<std::string> assetConfigs() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(STAGESCOPE_CONFIG_DIR)) {
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(AssetConfigs, AllNamedExamplesExistAndParse) {
  auto names = assetConfigs();
  for (const char* want :
       {"default", "single", "fan_in", "fan_out", "two_encoders", "llm_pp4", "llm_first"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const auto& name : names) {
    EXPECT_NO_THROW(loadConfig(std::string(STAGESCOPE_CONFIG_DIR) + "/" + name + ".toml")) << name;
  }
}

TEST(AssetConfigs, DefaultValues) {
  RunConfig c = loadConfig(std::string(STAGESCOPE_CONFIG_DIR) + "/default.toml");
  EXPECT_EQ(c.worldSize, 8);
  EXPECT_EQ(c.iterations, 2);
  EXPECT_EQ(c.microbatches, 4);
  EXPECT_EQ(c.seed, 1234u);
  EXPECT_EQ(c.optimizer.kind, events::OptimizerKind::Adam);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 1e-3);
  ASSERT_EQ(c.modules.size(), 2u);
  const ModuleConfig& vision = c.module("vision");
  EXPECT_EQ(vision.tp, 2);
  EXPECT_EQ(vision.dp, 2);
  EXPECT_EQ(vision.offset, 0);
  EXPECT_EQ(c.llm().name, "llm");
  EXPECT_EQ(c.llm().pp, 2);
  EXPECT_EQ(c.llm().offset, 4);
  EXPECT_EQ(c.encoderMicroBatchSize(vision), 1);  // 2 * 1 / 2
  EXPECT_EQ(c.globalBatch(), 8);
  EXPECT_EQ(c.modulesOfRank(3).at(0)->name, "vision");
  EXPECT_EQ(c.modulesOfRank(4).at(0)->name, "llm");
  EXPECT_TRUE(c.modulesOfRank(8).empty());
  ASSERT_EQ(c.encoders().size(), 1u);
}

const char* kMinimal = R"(
microbatches = 4
[[modules]]
name = "vision"
kind = "encoder"
[[modules]]
name = "llm"
kind = "llm"
offset = 1
layers = 4
)";

TEST(Config, DefaultsApply) {
  RunConfig c = parseConfig(kMinimal, "t.toml");
  EXPECT_EQ(c.sourceName, "t.toml");
  EXPECT_EQ(c.dtype, events::Dtype::Float32);
  EXPECT_EQ(c.backend, plan::Backend::Gloo);
  EXPECT_EQ(c.worldSize, 2);
  EXPECT_EQ(c.record.level, events::RecordLevel::Stats);
  EXPECT_FALSE(c.forwardOnly);
}

TEST(Config, SetOverridesTopLevelDottedAndModuleByName) {
  RunConfig c =
      parseConfig(kMinimal, "t.toml",
                  {"microbatches=8", "optimizer.lr=0.5", "optimizer.kind=adam", "modules.llm.pp=2",
                   "modules.vision.hidden = 64", "record.ranks=[0, 1]", "dtype=bfloat16",
                   "forward_only=true", "loss_scale=2"});
  EXPECT_EQ(c.microbatches, 8);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.5);
  EXPECT_EQ(c.optimizer.kind, events::OptimizerKind::Adam);
  EXPECT_EQ(c.llm().pp, 2);
  EXPECT_EQ(c.worldSize, 3);
  EXPECT_EQ(c.module("vision").hidden, 64);
  EXPECT_EQ(c.record.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(c.dtype, events::Dtype::BFloat16);  // bare string fallback
  EXPECT_TRUE(c.forwardOnly);
  EXPECT_DOUBLE_EQ(c.lossScale, 2.0);
  // The text is the TOML after overrides and parses back to the same config.
  RunConfig again = parseConfig(c.text, "again.toml");
  EXPECT_EQ(again.microbatches, 8);
  EXPECT_EQ(again.llm().pp, 2);
  EXPECT_EQ(again.module("vision").hidden, 64);
  EXPECT_EQ(again.dtype, events::Dtype::BFloat16);
}

TEST(Config, SetOverrideErrors) {
  EXPECT_NE(errorOf(kMinimal, {"microbatches"}).find("expected key=value"), std::string::npos);
  EXPECT_NE(errorOf(kMinimal, {"modules.ghost.tp=2"}).find("no module with this name"),
            std::string::npos);
  EXPECT_NE(errorOf(kMinimal, {"microbatches=0"}).find("microbatches = 0"), std::string::npos);
  EXPECT_NE(errorOf(kMinimal, {"colour=red"}).find("colour = \"red\": unknown key"),
            std::string::npos);
  EXPECT_NE(errorOf(kMinimal, {"modules.llm.tp=3"}).find("modules.llm.heads = 4"),
            std::string::npos);
}

TEST(Config, ErrorCarriesField) {
  try {
    parseConfig(kMinimal, "t.toml", {"modules.llm.dp=0"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "modules.llm.dp");
    EXPECT_EQ(
        std::string(e.what()),
        "t.toml: modules.llm.dp = 0: expected an integer in 1..4096 (the most ranks of one run)");
  }
}

TEST(Config, LoadNamesMissingFileAndTomlPosition) {
  try {
    loadConfig("/nonexistent/run.toml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/run.toml"), std::string::npos);
  }
  std::string bad = errorOf("iterations = 2\nseed = = 1\n");
  EXPECT_NE(bad.find("t.toml:2:"), std::string::npos) << bad;
  EXPECT_NE(bad.find("not valid TOML"), std::string::npos) << bad;
}

TEST(Config, StageLayers) {
  RunConfig c =
      parseConfig(kMinimal, "t.toml",
                  {"modules.llm.pp=3", "modules.llm.layers=6", "modules.llm.stage_layers=[1,2,3]"});
  const ModuleConfig& llm = c.llm();
  EXPECT_EQ(llm.layersOfStage(0), 1);
  EXPECT_EQ(llm.layersOfStage(2), 3);
  EXPECT_EQ(llm.firstLayerOfStage(2), 3);
  RunConfig even = parseConfig(kMinimal, "t.toml", {"modules.llm.pp=2"});
  EXPECT_EQ(even.llm().layersOfStage(1), 2);
  EXPECT_EQ(even.llm().firstLayerOfStage(1), 2);
}

TEST(Config, RecordFilters) {
  RecordConfig r;
  EXPECT_TRUE(r.wants(3, "llm", 5));
  r.iterations = {1};
  r.modules = {"llm"};
  EXPECT_TRUE(r.wants(1, "llm", 0));
  EXPECT_FALSE(r.wants(0, "llm", 0));
  EXPECT_FALSE(r.wants(1, "vision", 0));
  r.level = events::RecordLevel::Off;
  EXPECT_FALSE(r.wants(1, "llm", 0));
}

TEST(Config, FaultsParse) {
  RunConfig c = parseConfig(std::string(kMinimal) +
                                "[[faults]]\nkind = \"delay\"\nmodule = \"vision\"\n"
                                "microbatch = 2\ndelay_seconds = 0.5\n"
                                "[[faults]]\nkind = \"kill\"\nrank = 1\n",
                            "t.toml");
  ASSERT_EQ(c.faults.size(), 2u);
  EXPECT_EQ(c.faults[0].kind, plan::FaultKind::Delay);
  EXPECT_EQ(c.faults[0].microbatch, 2);
  EXPECT_DOUBLE_EQ(c.faults[0].delaySeconds, 0.5);
  EXPECT_EQ(c.faults[0].stage, -1);
  EXPECT_EQ(c.faults[1].rank, 1);
}

// The closed vocabularies are parsed once into enums; everything printed or hashed from them
// (the canonical fields, hence run.config_hash) still reads as the text the config gave.
TEST(Config, VocabulariesAreTypedAndPrintAsTheirText) {
  RunConfig c = parseConfig(std::string(kMinimal) +
                                "[optimizer]\nkind = \"adam\"\n"
                                "[[faults]]\nkind = \"nan\"\nmodule = \"llm\"\n"
                                "direction = \"gradient\"\n",
                            "t.toml", {"dtype=\"bfloat16\""});
  EXPECT_EQ(c.dtype, events::Dtype::BFloat16);
  EXPECT_EQ(c.device, Device::Cpu);
  EXPECT_EQ(c.backend, Backend::Gloo);
  EXPECT_EQ(c.optimizer.kind, events::OptimizerKind::Adam);
  EXPECT_EQ(c.module("vision").kind, events::ModuleKind::Encoder);
  EXPECT_TRUE(c.module("llm").isLlm());
  ASSERT_EQ(c.faults.size(), 1u);
  EXPECT_EQ(c.faults[0].kind, FaultKind::Nan);
  EXPECT_EQ(c.faults[0].direction, events::Direction::Gradient);
  const std::string text = canonicalText(canonicalFields(c));
  for (const char* line : {"\ndtype = bfloat16\n", "\ndevice = cpu\n", "\nbackend = gloo\n",
                           "\noptimizer.kind = adam\n", "\nmodules.vision.kind = encoder\n",
                           "\nmodules.llm.kind = llm\n", "\nfaults[0].kind = nan\n",
                           "\nfaults[0].direction = gradient\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " not in\n" << text;
  }
  for (FaultKind k : {FaultKind::Delay, FaultKind::Drop, FaultKind::Corrupt, FaultKind::Shape,
                      FaultKind::Nan, FaultKind::Inf, FaultKind::Kill}) {
    FaultKind back{};
    EXPECT_TRUE(parseFaultKind(toString(k), &back)) << toString(k);
    EXPECT_EQ(back, k);
  }
  FaultKind none{};
  EXPECT_FALSE(parseFaultKind("explode", &none));
}

// float64 names the reference's own trajectory (events::Dtype::Float64), never a config's.
TEST(Config, Float64IsNotAConfigDtype) {
  try {
    parseConfig(kMinimal, "t.toml", {"dtype=\"float64\""});
    FAIL() << "dtype = float64 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "t.toml: dtype = \"float64\": expected one of float32, bfloat16");
  }
}

}  // namespace
}  // namespace stagescope::plan
