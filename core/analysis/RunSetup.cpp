#include "core/analysis/RunSetup.h"

#include <exception>

#include "core/plan/Config.h"
#include "core/plan/RunLayout.h"

namespace stagescope::analysis {

const events::ModuleSettings* RunSetup::module(const std::string& name) const {
  for (const auto& m : settings.modules)
    if (m.name == name) return &m;
  return nullptr;
}

const events::ModuleSettings* RunSetup::llm() const {
  for (const auto& m : settings.modules)
    if (m.kind == events::ModuleKind::Llm) return &m;
  return nullptr;
}

RunSetup runSetupOf(const model::RunModel& run) {
  RunSetup s;
  // Format 1 did not store the record filter; a filtered run shows in its lists either way.
  const bool filterStored = run.schemaVersion >= 2 || !run.info.recordFilter.all();
  s.recordFilter = run.info.recordFilter;
  if (run.info.settings.recorded) {
    s.known = true;
    s.settings = run.info.settings;
    return s;
  }
  if (run.info.configText.empty()) {
    s.why = "the run has no stagescope config (a captured job)";
    return s;
  }
  // The fallback (see the header): a file without recorded settings.  The only place analysis
  // reads a run's own config text (PlanConformance reads a captured job's declared layout).
  try {
    const plan::RunConfig cfg = plan::parseConfig(run.info.configText, run.path);
    s.settings = plan::runSettings(cfg);
    s.settings.recorded = false;  // derived, not recorded
    s.known = true;
    s.fromConfigText = true;
    if (!filterStored) s.recordFilter = cfg.record.filter();
  } catch (const std::exception& e) {
    // A config that no longer parses (another version): no settings, the run judged unfiltered.
    s.why = std::string("its config does not parse: ") + e.what();
  }
  return s;
}

std::map<std::string, std::vector<int>> stageFirstLayersOf(const model::RunModel& run) {
  std::map<std::string, std::vector<int>> out;
  if (run.info.configText.empty()) return out;
  try {
    const plan::RunConfig cfg = plan::parseConfig(run.info.configText, run.path);
    for (const auto& m : cfg.modules) {
      auto& firsts = out[m.name];
      for (int s = 0; s < m.pp; ++s) firsts.push_back(m.firstLayerOfStage(s));
    }
  } catch (const std::exception&) {
    out.clear();  // another version's config: no boundaries, its P2P messages not aligned
  }
  return out;
}

}  // namespace stagescope::analysis
