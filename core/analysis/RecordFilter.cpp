#include "core/analysis/RecordFilter.h"

#include <algorithm>
#include <sstream>

#include "core/plan/Config.h"

namespace stagescope::analysis {

namespace {
template <class T>
bool inList(const std::vector<T>& v, const T& x) {
  return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
}
template <class T>
std::string listText(const std::vector<T>& v) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << "]";
  return o.str();
}
}  // namespace

bool RecordFilter::wants(int iteration, const std::string& module, int rank) const {
  return inList(iterations, iteration) && wantsRank(rank, module);
}

bool RecordFilter::wantsRank(int rank, const std::string& module) const {
  return inList(ranks, rank) && inList(modules, module);
}

std::string RecordFilter::describe() const {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : "; ") + part; };
  if (!ranks.empty()) add("record.ranks = " + listText(ranks));
  if (!modules.empty()) add("record.modules = " + listText(modules));
  if (!iterations.empty()) add("record.iterations = " + listText(iterations));
  return s.empty() ? "no record filter" : s;
}

RecordFilter recordFilterOf(const model::RunModel& run) {
  RecordFilter f;
  if (run.info.configText.empty()) return f;
  try {
    const plan::RunConfig cfg = plan::parseConfig(run.info.configText, run.path);
    f.iterations = cfg.record.iterations;
    f.ranks = cfg.record.ranks;
    f.modules = cfg.record.modules;
  } catch (const std::exception&) {
    // A config that no longer parses (another version): judge the run unfiltered.
  }
  return f;
}

}  // namespace stagescope::analysis
