// The headline of a comparison report (app/report/Headline.h): the first line says the verdict
// in at most about 200 characters, and the HTML says each part of the reason once (the
// first divergence in its card, each missing record in the headline or the list, never both).
#include <gtest/gtest.h>

#include <string>

#include "Fixture.h"
#include "app/report/CompareReport.h"
#include "app/report/Escape.h"
#include "app/report/Headline.h"

namespace stagescope::report {
namespace {

using testing::killedAt;
using testing::makeRun;

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The Markdown line that holds the verdict.
std::string verdictLine(const std::string& md) {
  const size_t at = md.find("**Verdict:");
  return at == std::string::npos ? "" : md.substr(at, md.find('\n', at) - at);
}

TEST(Headline, IncompleteStatesEachMissingRecordOnce) {
  const auto a = makeRun({.pp = 2, .iterations = 2});
  const auto c = analysis::compareRuns(a, killedAt(a, 1));
  ASSERT_EQ(c.verdict, analysis::Verdict::Incomplete) << c.verdictReason;
  ASSERT_GT(c.missing.size(), 4u);  // more than the reason names
  const std::string html = renderHtml(c);
  for (const auto& m : c.missing) EXPECT_EQ(occurrences(html, xmlEscape(m)), 1u) << m;
  // The headline names the first (the run did not complete) and counts the rest.
  const Headline line = headlineOf(c, Restate::Never);
  EXPECT_LE(line.text.size(), kHeadlineChars);
  EXPECT_NE(line.text.find(c.missing.front()), std::string::npos) << line.text;
  EXPECT_NE(line.text.find(std::to_string(c.missing.size() - 1) + " more listed below"),
            std::string::npos)
      << line.text;
  EXPECT_NE(html.find("Also missing:"), std::string::npos);
  const std::string md = renderMarkdown(c);
  EXPECT_LE(verdictLine(md).size(), 200u) << verdictLine(md);
  for (const auto& m : c.missing) EXPECT_EQ(occurrences(md, m), 1u) << m;
}

TEST(Headline, DivergedLeavesTheFirstDivergenceToItsCard) {
  const auto a = makeRun({.tp = 2, .pp = 4, .microbatches = 8, .iterations = 4, .seed = 1});
  const auto b = makeRun({.tp = 1, .pp = 4, .microbatches = 8, .iterations = 4, .seed = 2});
  const auto c = analysis::compareRuns(a, b);
  ASSERT_EQ(c.verdict, analysis::Verdict::Diverged) << c.verdictReason;
  ASSERT_NE(c.verdictReason.find(c.firstText), std::string::npos);
  const std::string html = renderHtml(c);
  EXPECT_EQ(occurrences(html, xmlEscape(c.firstText)), 1u);
  EXPECT_NE(html.find("id=\"first-divergence\""), std::string::npos);
  // Markdown keeps a reason that fits whole; this one does not, so its line is the count.
  const std::string md = renderMarkdown(c);
  EXPECT_LE(verdictLine(md).size(), 200u) << verdictLine(md);
  EXPECT_NE(md.find("- First divergence (causal order): " + c.firstText), std::string::npos);
}

TEST(Headline, AReasonThatFitsIsKeptWholeInMarkdown) {
  analysis::Comparison c;
  c.verdict = analysis::Verdict::Identical;
  c.verdictReason = "all 8 messages, 4 losses ... are bitwise equal";
  EXPECT_EQ(headlineOf(c, Restate::WhileItFits).text, c.verdictReason);
  EXPECT_EQ(headlineOf(c, Restate::Never).text, c.verdictReason);
}

TEST(Headline, ALongReasonIsCutAtAClauseAndItsRestStatedBelow) {
  analysis::Comparison c;
  c.verdict = analysis::Verdict::Incomplete;
  for (int i = 0; i < 12; ++i) c.verdictReason += (i ? "; " : "") + std::string(20, 'a' + i);
  const Headline line = headlineOf(c, Restate::WhileItFits);
  ASSERT_FALSE(line.rest.empty());
  EXPECT_LE(line.text.size(), kHeadlineChars + std::string(" …").size());
  ASSERT_GE(line.text.size(), 4u);
  EXPECT_EQ(line.text.substr(line.text.size() - 4), " …");
  // Headline and rest together are the reason, each clause once.
  EXPECT_EQ(line.text.substr(0, line.text.size() - 4) + "; " + line.rest, c.verdictReason);
  const std::string html = renderHtml(c);
  EXPECT_NE(html.find("id=\"reason\">… " + line.rest), std::string::npos);
}

TEST(Headline, ACutNeverSplitsAUtf8Character) {
  analysis::Comparison c;
  for (int i = 0; i < 100; ++i) c.verdictReason += "€";  // 3 bytes each, no space
  const Headline line = headlineOf(c, Restate::Never);
  const std::string head = line.text.substr(0, line.text.size() - 4);
  EXPECT_EQ(head.size() % 3, 0u);  // kHeadlineChars (160) falls inside a character
  EXPECT_EQ(head + line.rest, c.verdictReason);
}

}  // namespace
}  // namespace stagescope::report
