#include "app/report/CheckReport.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/report/Escape.h"
#include "core/events/Printable.h"
#include "storage/TextFile.h"

namespace stagescope::report {

using analysis::CheckReport;
using analysis::CheckStatus;
using analysis::Finding;

std::string renderJUnit(const CheckReport& rep) {
  int failures = 0, skipped = 0;
  for (const auto& r : rep.checks) {
    failures += r.status == CheckStatus::Failed;
    skipped += r.status == CheckStatus::Skipped;
  }
  std::ostringstream x;
  char time[32];
  std::snprintf(time, sizeof time, "%.6f", rep.seconds);
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"stagescope\" tests=\"" << rep.checks.size() << "\" failures=\""
    << failures << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << time << "\">\n";
  x << "  <testsuite name=\"stagescope.check\" tests=\"" << rep.checks.size() << "\" failures=\""
    << failures << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << time << "\">\n";
  x << "    <properties>\n";
  x << "      <property name=\"run\" value=\"" << xmlEscape(rep.runPath) << "\"/>\n";
  x << "      <property name=\"run_id\" value=\"" << xmlEscape(rep.runId) << "\"/>\n";
  x << "      <property name=\"status\" value=\"" << xmlEscape(rep.status) << "\"/>\n";
  if (rep.live.live())
    x << "      <property name=\"live\" value=\"" << xmlEscape(rep.live.line()) << "\"/>\n";
  x << "      <property name=\"exit_code\" value=\"" << rep.exitCode << "\"/>\n";
  x << "    </properties>\n";
  for (const auto& r : rep.checks) {
    std::snprintf(time, sizeof time, "%.6f", r.seconds);
    x << "    <testcase classname=\"stagescope.check\" name=\"" << xmlEscape(r.name) << "\" time=\""
      << time << "\">\n";
    if (r.status == CheckStatus::Failed) {
      std::string first = r.findings.empty() ? r.summary : r.findings.front().message;
      x << "      <failure type=\"" << xmlEscape(r.name) << "\" message=\""
        << xmlEscape("exit code " + std::to_string(r.exitCode) + ": " + first) << "\">";
      for (const auto& f : r.findings) x << xmlEscape(f.message) << "\n";
      if (r.total > static_cast<int64_t>(r.findings.size())) {
        x << "... and " << (r.total - static_cast<int64_t>(r.findings.size()))
          << " more, not kept (over the report's limit of findings per check)\n";
      }
      x << "</failure>\n";
    } else if (r.status == CheckStatus::Skipped) {
      x << "      <skipped message=\"" << xmlEscape(r.summary) << "\"/>\n";
    }
    x << "      <system-out>" << xmlEscape(r.summary) << "</system-out>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

void writeJUnit(const CheckReport& report, const std::string& path) {
  writeTextFile(path, renderJUnit(report));
}

namespace {
nlohmann::json findingJson(const Finding& f) {
  nlohmann::json j = {{"name", f.name}, {"exit_code", f.exitCode}, {"message", f.message}};
  if (f.rank >= 0) j["rank"] = f.rank;
  if (f.peerRank >= 0) j["peer_rank"] = f.peerRank;
  if (f.iteration >= 0) j["iteration"] = f.iteration;
  if (f.microbatch >= 0) j["microbatch"] = f.microbatch;
  if (f.actionSeq >= 0) j["action_seq"] = f.actionSeq;
  if (!f.action.empty()) j["action"] = f.action;
  if (!f.edge.empty()) j["edge"] = f.edge;
  if (!f.direction.empty()) j["direction"] = f.direction;
  if (!f.tensor.empty()) j["tensor"] = f.tensor;
  return j;
}
}  // namespace

std::string renderCheckJson(const CheckReport& rep) {
  nlohmann::json j;
  j["run"] = rep.runPath;
  j["run_id"] = rep.runId;
  j["status"] = rep.status;
  if (rep.live.live()) j["live"] = rep.live.line();  // being written as it was read: no verdict
  j["exit_code"] = rep.exitCode;
  j["passed"] = rep.passed();
  j["seconds"] = rep.seconds;
  j["checks"] = nlohmann::json::array();
  for (const auto& r : rep.checks) {
    nlohmann::json c = {
        {"name", r.name},       {"exit_code", r.exitCode}, {"status", toString(r.status)},
        {"summary", r.summary}, {"total", r.total},        {"seconds", r.seconds}};
    c["findings"] = nlohmann::json::array();
    for (const auto& f : r.findings) c["findings"].push_back(findingJson(f));
    // Present only when the report's per-check limit dropped findings: `total` counts them all.
    if (r.total > static_cast<int64_t>(r.findings.size()))
      c["findings_not_kept"] = r.total - static_cast<int64_t>(r.findings.size());
    j["checks"].push_back(std::move(c));
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void writeCheckJson(const CheckReport& report, const std::string& path) {
  writeTextFile(path, renderCheckJson(report));
}

// The text report lists this many findings of a class, then says how many more there are.
constexpr size_t kTextFindings = 20;

namespace {

// A class's summary as text lines: the whole summary where its line stays within about 200
// characters, else its first clause (up to the first "; " outside parentheses) on the class's
// line and each further clause on a line of its own below it.  JSON and JUnit keep it whole.
constexpr size_t kSummaryFits = 160;  // the class's line: ~36 characters of mark, name, code

std::vector<std::string> summaryLines(const std::string& summary) {
  if (summary.size() <= kSummaryFits) return {summary};
  std::vector<std::string> out;
  int depth = 0;
  size_t from = 0;
  for (size_t i = 0; i + 1 < summary.size(); ++i) {
    const char c = summary[i];
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (c == ';' && summary[i + 1] == ' ' && depth == 0) {
      out.push_back(summary.substr(from, i - from));
      from = i + 2;
    }
  }
  out.push_back(summary.substr(from));
  return out;
}

}  // namespace

std::string renderCheckText(const CheckReport& rep) {
  std::ostringstream o;
  // Everything below may quote the run file (its id, module names, messages): each piece is
  // made one printable line, so a hostile file can neither break lines nor drive the terminal.
  using events::printableLine;
  o << "stagescope check " << printableLine(rep.runPath.empty() ? rep.runId : rep.runPath)
    << " (status " << printableLine(rep.status)
    << (rep.live.live() ? "; " + printableLine(rep.live.summary) : "") << ")\n";
  for (const auto& r : rep.checks) {
    const char* mark = r.status == CheckStatus::Passed   ? "PASS"
                       : r.status == CheckStatus::Failed ? "FAIL"
                                                         : "SKIP";
    char head[96];
    std::snprintf(head, sizeof head, "  %s  %-19s (exit %2d)  ", mark, r.name.c_str(), r.exitCode);
    const std::vector<std::string> lines = summaryLines(r.summary);
    o << head << printableLine(lines.front());
    if (r.status == CheckStatus::Failed) o << "; " << r.total << " failure(s)";
    o << "\n";
    for (size_t i = 1; i < lines.size(); ++i) o << "        " << printableLine(lines[i]) << "\n";
    const size_t shown = std::min(r.findings.size(), kTextFindings);
    for (size_t i = 0; i < shown; ++i)
      o << "        - " << printableLine(r.findings[i].message) << "\n";
    if (r.total > static_cast<int64_t>(shown)) {
      o << "        ... and " << (r.total - static_cast<int64_t>(shown))
        << " more (--json and --junit list every one)\n";
    }
  }
  if (rep.live.live()) {
    // No verdict on a run that is still being written (exit 10, run_status).
    o << "result: NOT ENDED, exit " << rep.exitCode << ": the run is "
      << printableLine(rep.live.summary)
      << "; the checks above judged a snapshot: check again once it has ended\n";
  } else if (rep.passed()) {
    o << "result: all checks passed (exit 0)\n";
  } else {
    std::string worst;
    for (const auto& r : rep.checks) {
      if (r.exitCode == rep.exitCode) worst = r.name;
    }
    o << "result: FAILED, exit " << rep.exitCode << " (" << worst << ", the most severe failure)\n";
  }
  return o.str();
}

}  // namespace stagescope::report
