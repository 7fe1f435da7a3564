#include "app/RunFileCreation.h"

#ifdef STAGESCOPE_HAVE_ENGINE
#include <torch/version.h>
#endif

#include <chrono>
#include <filesystem>

#include "app/Commands.h"
#include "core/engine/RunIdentity.h"  // kStagescopeVersion (a constant; nothing is linked)
#include "core/plan/ConfigFields.h"
#include "core/plan/RunLayout.h"
#include "storage/Merge.h"
#include "storage/OutputPolicy.h"

namespace stagescope::app {

namespace fs = std::filesystem;

int64_t unixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

events::RunInfo runInfoFor(const plan::RunConfig& cfg, const std::string& out) {
  events::RunInfo info;
  info.runId = fs::path(out).stem().string();
  info.configText = cfg.text;
  info.configHash = plan::configHash(cfg);  // the hash the ranks compare at rendezvous
  info.worldSize = cfg.worldSize;
  info.iterations = cfg.iterations;
  info.microbatches = cfg.microbatches;
  info.level = cfg.record.level;
  info.recordFilter = cfg.record.filter();
  info.modules = plan::moduleInfos(cfg);
  info.settings = plan::runSettings(cfg);  // what analysis reads (not the config text)
  info.versionStagescope = engine::kStagescopeVersion;
#ifdef STAGESCOPE_HAVE_ENGINE
  info.versionTorch = TORCH_VERSION;
#endif
  info.compiler = std::string("g++ ") + __VERSION__;
  info.startUnixMs = unixMs();
  return info;
}

void createNewRunFile(const std::string& out, const events::RunInfo& info) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec))) {
    throw storage::OutputRefused(out +
                                 ": appeared while the run was starting; expected no file there");
  }
  try {
    storage::createRunFile(out, info);
  } catch (...) {
    fs::remove(out, ec);
    fs::remove(out + "-journal", ec);
    throw;
  }
}

void createRunFileFor(const std::string& config, const std::string& out, const std::string& runId) {
  const plan::RunConfig cfg = plan::loadConfig(config);
  storage::createParentDirectories(out);
  events::RunInfo info = runInfoFor(cfg, out);
  if (!runId.empty()) info.runId = runId;
  createNewRunFile(out, info);
}

}  // namespace stagescope::app
