// The check report's text (app/report/CheckReport.h): each class's line stays within about 200
// characters, a longer summary continuing one clause per line below it; JSON keeps it whole.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app/report/CheckReport.h"

namespace stagescope::report {
namespace {

using analysis::CheckReport;
using analysis::CheckResult;
using analysis::CheckStatus;

CheckReport reportWith(const std::string& summary) {
  CheckReport rep;
  rep.runPath = "r.db";
  rep.status = "completed";
  CheckResult r;
  r.name = "reference_gradient";
  r.exitCode = 17;
  r.status = CheckStatus::Passed;
  r.summary = summary;
  rep.checks.push_back(r);
  return rep;
}

TEST(CheckText, ALongSummaryContinuesOneClausePerLine) {
  const std::string first =
      "216 parameter gradients compared with the reference (0 by values, "
      "216 by norms (fallback; no payloads))";
  const std::string rule = "rule (relative L2: gradients 0.0001 in iteration 0; losses 1e-06)";
  const std::string third = std::string(120, 'x');
  const CheckReport rep = reportWith(first + "; " + rule + "; " + third);
  const std::string text = renderCheckText(rep);
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);  // "stagescope check r.db (status completed)"
  std::getline(lines, line);
  EXPECT_NE(line.find("PASS  reference_gradient"), std::string::npos) << text;
  EXPECT_EQ(line.substr(line.size() - first.size()), first) << text;  // "; " in parentheses kept
  EXPECT_LE(line.size(), 200u) << text;
  std::getline(lines, line);
  EXPECT_EQ(line, "        " + rule) << text;
  std::getline(lines, line);
  EXPECT_EQ(line, "        " + third) << text;
  // Machines read the summary whole.
  EXPECT_EQ(nlohmann::json::parse(renderCheckJson(rep))["checks"][0]["summary"],
            first + "; " + rule + "; " + third);
}

TEST(CheckText, AShortSummaryStaysOnItsLine) {
  const std::string summary = "64 messages compared; 3 copies compared";
  const std::string text = renderCheckText(reportWith(summary));
  EXPECT_NE(text.find("(exit 17)  " + summary + "\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace stagescope::report
