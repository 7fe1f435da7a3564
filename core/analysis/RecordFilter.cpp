#include "core/analysis/RecordFilter.h"

#include <algorithm>
#include <sstream>

#include "core/analysis/RunSetup.h"

namespace stagescope::analysis {

namespace {
template <class T>
std::string listText(const std::vector<T>& v) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << "]";
  return o.str();
}
}  // namespace

bool RecordFilter::wantsRankOf(const model::RunModel& run, int iteration, int rank) const {
  const auto rows = run.modulesOf(rank);
  if (rows.empty()) {
    for (const auto& r : run.ranks)  // rows a caller built out of order
      if (r.rank == rank) return wants(iteration, r.module, rank);
    return wants(iteration, "", rank);
  }
  return std::any_of(rows.begin(), rows.end(),
                     [&](const auto& r) { return wants(iteration, r.module, rank); });
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
  // As stored; a format-1 file's from its config text (RunSetup.h, the one fallback).
  static_cast<events::RecordFilter&>(f) = runSetupOf(run).recordFilter;
  return f;
}

}  // namespace stagescope::analysis
