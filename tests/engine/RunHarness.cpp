#include "tests/engine/RunHarness.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <stdexcept>

namespace stagescope::testing {

std::string stagescopeExe() {
  const char* exe = std::getenv("STAGESCOPE_EXE");
  return exe ? exe : STAGESCOPE_EXE_DEFAULT;
}

std::string sourcePath(const std::string& relative) {
  return std::string(STAGESCOPE_SOURCE_DIR) + "/" + relative;
}

std::string assetConfig(const std::string& name) {
  return std::string(STAGESCOPE_SOURCE_DIR) + "/assets/configs/" + name + ".toml";
}

std::string tempRunPath(const std::string& tag) {
  auto dir =
      std::filesystem::temp_directory_path() / ("stagescope-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / (tag + ".db")).string();
}

RunOutput runStagescope(const std::string& config, const std::vector<std::string>& args,
                        const std::string& tag, int timeoutSeconds) {
  RunOutput out;
  out.runPath = tempRunPath(tag);
  std::string cmd = "timeout -s KILL " + std::to_string(timeoutSeconds) + " '" + stagescopeExe() +
                    "' run '" + config + "' -o '" + out.runPath + "' -q --force";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.output.append(buf.data(), n);
  int status = pclose(p);
  out.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

std::vector<float> floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

namespace {

int64_t product(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// Copies a shard into the full tensor along partitionDim at partitionOffset (row-major).
void place(std::vector<float>& full, const events::GradientRecord& g) {
  const auto shard = floats(g.payload);
  if (g.partitionDim < 0) {
    full = shard;
    return;
  }
  const auto& fs = g.fullShape;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < g.partitionDim; ++d) outer *= fs[d];
  for (size_t d = g.partitionDim + 1; d < fs.size(); ++d) inner *= fs[d];
  const int64_t part = g.shape[g.partitionDim], dim = fs[g.partitionDim];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t p = 0; p < part; ++p) {
      std::memcpy(&full[(o * dim + g.partitionOffset + p) * inner], &shard[(o * part + p) * inner],
                  inner * sizeof(float));
    }
  }
}

}  // namespace

std::map<std::pair<int, std::string>, std::vector<float>> gatherReduced(
    const model::RunModel& run) {
  return gatherPhase(run, events::GradPhase::Reduced);
}

std::map<std::pair<int, std::string>, std::vector<float>> gatherPhase(const model::RunModel& run,
                                                                      events::GradPhase phase) {
  std::map<std::pair<int, std::string>, std::vector<float>> out;
  for (const auto& g : run.gradients) {
    if (g.phase != phase || g.dp != 0 || g.payload.empty()) continue;
    if (g.partitionDim < 0 && g.tp != 0) continue;
    auto& full = out[{g.iteration, g.param}];
    if (full.empty()) full.assign(product(g.fullShape), std::nanf(""));
    place(full, g);
  }
  return out;
}

std::map<std::pair<int, std::string>, std::vector<float>> referenceGradients(
    const model::RunModel& run) {
  std::map<std::pair<int, std::string>, std::vector<float>> out;
  for (const auto& g : run.referenceGradients) out[{g.iteration, g.param}] = floats(g.payload);
  return out;
}

std::map<int, double> iterationLosses(const model::RunModel& run, bool reference) {
  std::map<int, double> out;
  for (const auto& l : reference ? run.referenceLosses : run.losses) {
    if (l.microbatch == -1) out[l.iteration] = l.loss;
  }
  return out;
}

double l2norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

double relativeError(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

void expectSameMaths(const model::RunModel& run, const model::RunModel& other, bool reference,
                     const std::string& what) {
  auto losses = iterationLosses(run, false), want = iterationLosses(other, reference);
  ASSERT_EQ(losses.size(), static_cast<size_t>(run.info.iterations)) << what;
  ASSERT_EQ(want.size(), losses.size()) << what;
  for (const auto& [it, loss] : losses) {
    EXPECT_NEAR(loss, want[it], 1e-6 * std::abs(want[it])) << what << " iteration " << it;
  }
  auto grads = gatherReduced(run);
  auto ref = reference ? referenceGradients(other) : gatherReduced(other);
  ASSERT_FALSE(ref.empty()) << what;
  EXPECT_EQ(grads.size(), ref.size()) << what << ": every parameter has a reduced gradient";
  for (const auto& [key, w] : ref) {
    auto it = grads.find(key);
    ASSERT_NE(it, grads.end()) << what << ": no gradient for " << key.second << " iteration "
                               << key.first;
    if (l2norm(w) < 1e-6) {
      EXPECT_LE(l2norm(it->second), 1e-5)
          << what << ": " << key.second << " iteration " << key.first;
      continue;
    }
    EXPECT_LE(relativeError(it->second, w), 1e-5)
        << what << ": " << key.second << " iteration " << key.first;
  }
}

}  // namespace stagescope::testing
