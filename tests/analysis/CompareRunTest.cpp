// compare's verdicts (core/analysis/Compare.h, Align.h) over in-memory runs
// (tests/report/Fixture.h): alignment by logical identity, the first divergence in causal
// order, never equal unless both runs are complete; the reports are read where a verdict's
// wording is the product.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "Fixture.h"
#include "app/report/CheckReport.h"
#include "app/report/CompareReport.h"
#include "app/report/Escape.h"
#include "core/analysis/Analysis.h"

using namespace stagescope;
using namespace stagescope::report;
using namespace stagescope::analysis;
using namespace stagescope::report::testing;  // the fixture and its helpers (Fixture.h)

// ---- compare ----------------------------------------------------------------------------------

TEST(Compare, IdenticalRuns) {
  auto a = makeRun({.tp = 2, .pp = 2, .dp = 2, .iterations = 2});
  auto b = makeRun({.tp = 2, .pp = 2, .dp = 2, .iterations = 2});
  auto c = compareRuns(a, b);
  EXPECT_EQ(c.verdict, Verdict::Identical) << c.verdictReason;
  EXPECT_FALSE(c.firstDivergent.has_value());
  EXPECT_TRUE(c.configEqual);
  EXPECT_GT(c.transfersCompared, 0u);
  EXPECT_EQ(c.transfersDiffering, 0u);
  EXPECT_EQ(c.lossesCompared, 2u * 4u * 2u);
  EXPECT_EQ(c.gradsCompared, 2u * 8u);
}

// A message whose receiver recorded other bytes than its sender, inside run A: compare names it
// as that run's own disagreement, not "checksums differ" (A's send checksum equals B's).
TEST(Compare, SidesDisagreeingInsideOneRunAreNamedAsSuch) {
  auto a = makeRun({.pp = 3});
  auto b = makeRun({.pp = 3});
  int64_t i =
      findTransfer(a, "llm:pp1->pp2", events::Direction::Activation, 0, 2, events::Side::Recv);
  ASSERT_GE(i, 0);
  a.transfers[i].checksum ^= 0xdeadbeef;
  repair(a);
  CompareOptions opts;
  opts.labelA = "A.db";
  opts.labelB = "B.db";
  auto c = compareRuns(a, b, opts);
  EXPECT_EQ(c.verdict, Verdict::Diverged) << c.verdictReason;
  ASSERT_TRUE(c.firstDivergent.has_value());
  EXPECT_EQ(c.firstDivergent->reason, "sender and receiver disagree in A.db");
  EXPECT_NE(c.firstText.find("(sender and receiver disagree in A)"), std::string::npos)
      << c.firstText;
}

TEST(Compare, DifferentSeedFirstDivergenceIsFirstForwardActivation) {
  auto a = makeRun({.pp = 3, .microbatches = 4, .iterations = 2, .seed = 1});
  auto b = makeRun({.pp = 3, .microbatches = 4, .iterations = 2, .seed = 7});
  auto c = compareRuns(a, b);
  EXPECT_EQ(c.verdict, Verdict::Diverged);
  ASSERT_TRUE(c.firstDivergent.has_value());
  const auto& d = *c.firstDivergent;
  EXPECT_EQ(d.edge, "llm:pp0->pp1");
  EXPECT_EQ(d.direction, events::Direction::Activation);
  EXPECT_EQ(d.iteration, 0);
  EXPECT_EQ(d.microbatch, 0);
  EXPECT_EQ(d.reason, "checksums");
  EXPECT_EQ(d.a.srcRank, 0);
  EXPECT_EQ(d.a.dstRank, 1);
  EXPECT_NE(d.a.checksums, d.b.checksums);
  EXPECT_FALSE(c.configEqual);
  bool seedLine = false;
  for (const auto& l : c.configDiff) seedLine |= l.op == '+' && l.text == "seed = 7";
  EXPECT_TRUE(seedLine);
  EXPECT_GT(c.maxLossRelDiff, 0);
}

TEST(Compare, DivergenceAtLaterTransferIsFoundInScheduleOrder) {
  auto a = makeRun({.pp = 3, .microbatches = 4});
  auto b = a;
  // Two differences: gradient mb0 on pp0->pp1 and activation mb2 on pp1->pp2; schedule order
  // puts mb0 first.
  auto flip = [&](const std::string& edge, events::Direction d, int mb) {
    for (auto& t : b.transfers) {
      if (t.edge == edge && t.direction == d && t.microbatch == mb) t.checksum ^= 1;
    }
  };
  flip("llm:pp1->pp2", events::Direction::Activation, 2);
  flip("llm:pp0->pp1", events::Direction::Gradient, 0);
  auto c = compareRuns(a, b);
  ASSERT_TRUE(c.firstDivergent.has_value());
  EXPECT_EQ(c.firstDivergent->edge, "llm:pp0->pp1");
  EXPECT_EQ(c.firstDivergent->direction, events::Direction::Gradient);
  EXPECT_EQ(c.firstDivergent->microbatch, 0);
  EXPECT_EQ(c.transfersDiffering, 2u);
}

TEST(Compare, TwoLayoutsOfTheSameNumbersCompareEqual) {
  // TP2 shards vs TP1 full tensors, with payloads: gathered values are bitwise equal.
  auto a = makeRun({.tp = 2, .pp = 2, .payloads = true});
  auto b = makeRun({.tp = 1, .pp = 2, .payloads = true});
  auto c = compareRuns(a, b);
  EXPECT_EQ(c.verdict, Verdict::Identical) << c.verdictReason;
  EXPECT_FALSE(c.firstDivergent.has_value());
  EXPECT_EQ(c.gradsCompared, 8u);
  EXPECT_EQ(c.transfersOnlyA + c.transfersOnlyB, 0u);
  // Without payloads only norms can be compared: equal within tolerance (not bitwise).
  auto a2 = makeRun({.tp = 2, .pp = 2});
  auto b2 = makeRun({.tp = 1, .pp = 2});
  auto c2 = compareRuns(a2, b2);
  EXPECT_NE(c2.verdict, Verdict::Diverged) << c2.verdictReason;
  EXPECT_LT(c2.maxGradRelDiff, 1e-12);
  // The gathered norm equals the full one.
  for (const auto& g : c2.gradLast) EXPECT_NEAR(g.normA, g.normB, 1e-12 * g.normB) << g.param;
}

TEST(Compare, DifferentPipelineDepthAlignsLossesAndGradients) {
  auto a = makeRun({.pp = 2, .layers = 4});
  auto b = makeRun({.pp = 4, .layers = 4});
  auto c = compareRuns(a, b);
  EXPECT_EQ(c.lossesDiffering, 0u);
  EXPECT_EQ(c.gradsDiffering, 0u);
  // "llm:pp0->pp1" means a different layer boundary in each run: not aligned, not a divergence.
  EXPECT_FALSE(c.firstDivergent.has_value());
  EXPECT_EQ(c.transfersCompared, 0u);
  EXPECT_EQ(c.transfersOnlyA + c.transfersOnlyB, 0u);  // not missing: not alignable
  EXPECT_GT(c.alignment.notAligned, 0u);
  EXPECT_EQ(c.verdict, Verdict::Identical) << c.verdictReason;
}

// One gradient maximum everywhere: the headline's "reduced gradients" is the counts line's
// maximum (the headline said 1.15e-06 over every gradient phase while the counts line said
// 6.75e-07 over the reduced ones).
TEST(Compare, HeadlineAndCountsShareTheReducedGradientMaximum) {
  auto a = makeRun({.tp = 2, .pp = 2});
  auto b = makeRun({.tp = 1, .pp = 2});
  const auto c = compareRuns(a, b);
  ASSERT_EQ(c.verdict, Verdict::WithinTolerance) << c.verdictReason;
  const std::string key = "reduced gradients ";
  const auto at = c.verdictReason.find(key);
  ASSERT_NE(at, std::string::npos) << c.verdictReason;
  const double headline = std::stod(c.verdictReason.substr(at + key.size()));
  EXPECT_NEAR(headline, c.maxGradRelDiff, 0.01 * c.maxGradRelDiff) << c.verdictReason;
  const std::string md = renderMarkdown(c);
  const auto line = md.find("- Reduced gradients: ");
  ASSERT_NE(line, std::string::npos) << md;
  const std::string countsLine = md.substr(line, md.find('\n', line) - line);
  const std::string maxKey = "max relative difference ";
  const double counted = std::stod(countsLine.substr(countsLine.find(maxKey) + maxKey.size()));
  EXPECT_NEAR(counted, headline, 0.01 * headline) << countsLine;
}

TEST(Compare, BubbleAndTimes) {
  auto a = makeRun({.pp = 4, .microbatches = 8});
  auto c = compareRuns(a, a);
  EXPECT_NEAR(c.a.time.expectedBubble, 3.0 / 11.0, 1e-12);
  EXPECT_EQ(c.a.time.ranks.size(), 4u);
  EXPECT_GT(c.a.time.measuredBubble, 0.1);
  EXPECT_LT(c.a.time.measuredBubble, 0.6);
  EXPECT_GT(c.a.time.medianStepMs, 0);
  for (const auto& r : c.a.time.ranks) {
    EXPECT_NEAR(r.forwardMs, 8 * 1.0, 1e-9);
    EXPECT_NEAR(r.backwardMs, 8 * 2.0, 1e-9);
  }
}

TEST(Compare, WritersProduceChartsAndParse) {
  auto a = makeRun({.tp = 2, .pp = 3, .microbatches = 6, .iterations = 3, .seed = 1});
  auto b = makeRun({.tp = 2, .pp = 3, .microbatches = 6, .iterations = 3, .seed = 2});
  stagescope::analysis::CompareOptions opts;
  opts.labelA = "baseline";
  opts.labelB = "candidate";
  auto c = compareRuns(a, b, opts);
  auto html = renderHtml(c);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no network refs
  EXPECT_EQ(html.find("https://"), std::string::npos);
  size_t svgs = 0;
  for (size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) {
    size_t e = html.find("</svg>", p);
    ASSERT_NE(e, std::string::npos);
    std::string body = html.substr(p, e - p);
    EXPECT_TRUE(body.find("<path") != std::string::npos || body.find("<rect") != std::string::npos)
        << "empty chart";
    ++svgs;
  }
  EXPECT_GE(svgs, 4u);  // loss, grad bars, grad-norm line, step time, 2 x time per rank
  EXPECT_NE(html.find("diverged"), std::string::npos);
  EXPECT_NE(html.find("llm:pp0-&gt;pp1"), std::string::npos);
  // The schedules line of the text report is in the HTML too.
  EXPECT_NE(html.find("id=\"schedules\">" +
                      report::xmlEscape(c.schedule.describe("baseline", "candidate"))),
            std::string::npos);
  auto path = tempPath("compare.html");
  writeHtml(c, path);
  EXPECT_EQ(readFile(path), html);

  auto md = renderMarkdown(c);
  EXPECT_NE(md.find("**Verdict: DIVERGED**"), std::string::npos);
  EXPECT_NE(md.find("First divergent message"), std::string::npos);
  EXPECT_NE(md.find("```diff"), std::string::npos);

  auto j = nlohmann::json::parse(renderJson(c));
  EXPECT_EQ(j["verdict"], "diverged");
  EXPECT_EQ(j["transfers"]["first_divergent"]["edge"], "llm:pp0->pp1");
  EXPECT_EQ(j["transfers"]["first_divergent"]["microbatch"], 0);
  EXPECT_EQ(j["a"]["ranks"].size(), 6u);
}

TEST(Compare, TransferPayloadsAreJudgedByValues) {
  // Payloads on both sides: the message is judged by its values (relative L2), not checksums.
  auto a = makeRun({.pp = 2});
  auto b = makeRun({.pp = 2});
  auto put = [](model::RunModel& run, float v) {
    for (auto& t : run.transfers) {
      std::vector<float> x(8, v);
      t.payload.resize(x.size() * 4);
      std::memcpy(t.payload.data(), x.data(), t.payload.size());
      t.dtype = "float32";
    }
  };
  put(a, 1.0f);
  put(b, 1.5f);
  auto c = compareRuns(a, b);
  ASSERT_TRUE(c.firstDivergent.has_value());
  EXPECT_EQ(c.firstDivergent->reason, "values");
  EXPECT_NEAR(c.firstDivergent->relDiff, 0.5 / 1.5, 1e-12);
  ASSERT_TRUE(c.first.has_value());
  EXPECT_EQ(c.first->evidence, Evidence::Values);
}

TEST(Compare, IncompleteRunIsNeverEqual) {
  // B was killed in iteration 1: everything both recorded is equal, yet the verdict is
  // INCOMPLETE (exit 19), naming what is missing.
  auto a = makeRun({.pp = 2, .iterations = 2});
  auto b = a;
  b.info.status = events::RunStatus::Killed;
  b.info.statusReason = "rank 1 was killed";
  for (auto& list : b.actions) {
    list.erase(std::remove_if(list.begin(), list.end(),
                              [](const events::ActionRecord& x) { return x.iteration == 1; }),
               list.end());
  }
  b.transfers.erase(
      std::remove_if(b.transfers.begin(), b.transfers.end(),
                     [](const events::TransferRecord& t) { return t.iteration == 1; }),
      b.transfers.end());
  b.gradients.erase(
      std::remove_if(b.gradients.begin(), b.gradients.end(),
                     [](const events::GradientRecord& g) { return g.iteration == 1; }),
      b.gradients.end());
  b.losses.erase(std::remove_if(b.losses.begin(), b.losses.end(),
                                [](const events::LossRecord& l) { return l.iteration == 1; }),
                 b.losses.end());
  repair(b);
  auto c = compareRuns(a, b);
  EXPECT_EQ(c.verdict, Verdict::Incomplete) << c.verdictReason;
  EXPECT_EQ(exitCodeOf(c.verdict), 19);
  EXPECT_FALSE(c.first.has_value());
  EXPECT_NE(c.verdictReason.find("killed"), std::string::npos) << c.verdictReason;
  EXPECT_GT(c.alignment.onlyA, 0u);
  EXPECT_NE(renderMarkdown(c).find("INCOMPLETE"), std::string::npos);
  // The same holds the other way round and through check --against.
  EXPECT_EQ(compareRuns(b, a).verdict, Verdict::Incomplete);
  CheckOptions o;
  o.against = &b;
  o.againstBitwise = false;
  EXPECT_EQ(checkRun(a, o).find("against")->status, CheckStatus::Failed);
}

TEST(Compare, SwappedTpShardsDivergeByValuesThoughNormsAgree) {
  auto a = makeRun({.tp = 2, .pp = 2, .payloads = true});
  auto b = a;
  // Swap the payloads of the two TP shards of one reduced gradient split along a dimension.
  std::string param;
  for (auto& g : b.gradients) {
    if (g.phase == events::GradPhase::Reduced && g.partitionDim >= 0 && g.partitionOffset == 0) {
      param = g.param;
      break;
    }
  }
  ASSERT_FALSE(param.empty());
  std::vector<events::GradientRecord*> shards;
  for (auto& g : b.gradients) {
    if (g.phase == events::GradPhase::Reduced && g.param == param && g.iteration == 0) {
      shards.push_back(&g);
    }
  }
  ASSERT_GE(shards.size(), 2u);
  events::GradientRecord* s0 = nullptr;
  events::GradientRecord* s1 = nullptr;
  for (auto* g : shards) (g->partitionOffset == 0 ? s0 : s1) = g;
  ASSERT_TRUE(s0 && s1);
  for (auto* g : shards) {
    auto& other = g->partitionOffset == 0 ? *s1 : *s0;
    (void)other;
  }
  std::vector<uint8_t> p0 = s0->payload, p1 = s1->payload;
  for (auto* g : shards) g->payload = g->partitionOffset == 0 ? p1 : p0;
  auto c = compareRuns(a, b);
  EXPECT_EQ(c.verdict, Verdict::Diverged) << c.verdictReason;
  ASSERT_TRUE(c.first.has_value());
  EXPECT_EQ(c.first->kind, ItemKind::Gradient);
  EXPECT_EQ(c.first->param, param);
  EXPECT_EQ(c.first->evidence, Evidence::Values);
  EXPECT_GT(c.first->distance, 0.1);
  EXPECT_EQ(c.first->valueA, c.first->valueB);  // the norms cannot see it
}

TEST(Compare, NonFiniteLossIsNeverZeroOrEqual) {
  auto a = makeRun({.pp = 2, .iterations = 2});
  auto b = a;
  for (auto& l : b.losses) {
    if (l.iteration == 0 && l.microbatch == 1) l.loss = NAN;
  }
  auto c = compareRuns(a, b);
  EXPECT_EQ(c.verdict, Verdict::Diverged) << c.verdictReason;
  ASSERT_TRUE(c.first.has_value());
  EXPECT_EQ(c.first->kind, ItemKind::Loss);
  EXPECT_EQ(c.first->microbatch, 1);
  const auto j = nlohmann::json::parse(renderJson(c));
  bool sawNaN = false;
  for (const auto& r : j["losses"]["rows"]) {
    if (r["microbatch"] == 1 && r["iteration"] == 0) {
      EXPECT_EQ(r["b"], "NaN");
      sawNaN = true;
    }
  }
  EXPECT_TRUE(sawNaN);
  // The Markdown (also compare's stdout) prints the NaN mean of iteration 0 as NaN, not as "-"
  // (which means "not recorded"), and iteration 1, recorded and finite, as a number.
  const std::string md = renderMarkdown(c);
  const auto row0 = md.find("| 0 | ");
  ASSERT_NE(row0, std::string::npos) << md;
  const std::string line0 = md.substr(row0, md.find('\n', row0) - row0);
  EXPECT_EQ(line0.find(" - "), std::string::npos) << line0;
  EXPECT_NE(line0.find("| NaN | NaN |"), std::string::npos) << line0;
  EXPECT_NE(md.find("| 1 | "), std::string::npos) << md;
  EXPECT_EQ(md.find("| 1 | NaN"), std::string::npos) << md;
  // The HTML loss chart marks B's NaN point (it used to leave a silent gap), and only that one.
  const std::string html = renderHtml(c);
  const size_t chart = html.find("id=\"loss-chart\"");
  ASSERT_NE(chart, std::string::npos);
  const std::string svg = html.substr(chart, html.find("</svg>", chart) - chart);
  size_t markers = 0;
  for (size_t at = svg.find(">NaN</text>"); at != std::string::npos;
       at = svg.find(">NaN</text>", at + 1))
    ++markers;
  EXPECT_EQ(markers, 1u) << svg;
}

// Losses that differ only within the tolerance are counted "within tolerance", never "differ"
// ("differ" means beyond the tolerance): the iteration means were counted as differing whenever
// they were not bitwise equal, so an EQUAL WITHIN TOLERANCE compare said "2 differ".
TEST(Compare, LossesWithinToleranceAreNotCountedAsDiffering) {
  auto a = makeRun({.pp = 2, .iterations = 2});
  auto b = makeRun({.pp = 4, .iterations = 2});  // another layout: round-off is allowed
  for (auto& l : b.losses) l.loss *= 1 + 1e-9;
  // Each iteration's mean loss too (the engine records it; the fixture does not).
  for (auto* run : {&a, &b}) {
    std::map<std::pair<int, int>, std::pair<double, int>> sums;  // (iteration, rank) -> sum, n
    for (const auto& l : run->losses) {
      auto& s = sums[{l.iteration, l.rank}];
      s.first += l.loss;
      ++s.second;
    }
    for (const auto& [key, s] : sums)
      run->losses.push_back({key.second, key.first, -1, 0, s.first / s.second});
  }
  const auto c = compareRuns(a, b);
  EXPECT_EQ(c.verdict, Verdict::WithinTolerance) << c.verdictReason;
  ASSERT_GT(c.lossesCompared, 0u);
  EXPECT_EQ(c.lossesDiffering, 0u);
  EXPECT_EQ(c.lossesWithinTolerance, c.lossesCompared);
}

// A gradient whose norm is NaN in B: both reports name it NaN in the gradient table, never "-"
// or "&ndash;" (which mean "not recorded"), and the norm of A next to it stays a number.
TEST(Compare, NonFiniteGradientNormIsNamedInBothReports) {
  auto a = makeRun({.pp = 2, .iterations = 2});
  auto b = a;
  std::string param;
  for (auto& g : b.gradients) {
    if (g.phase != events::GradPhase::Reduced || g.iteration != 1) continue;
    if (param.empty()) param = g.param;
    if (g.param != param) continue;
    g.norm = NAN;
    g.stats.l2 = NAN;
    g.stats.nanCount = 1;
    g.checksum ^= 1;  // the data differs too
  }
  ASSERT_FALSE(param.empty());
  const auto c = compareRuns(a, b);
  const auto row = std::find_if(c.gradTop.begin(), c.gradTop.end(),
                                [&](const GradRow& g) { return g.param == param; });
  ASSERT_NE(row, c.gradTop.end());
  ASSERT_TRUE(row->hasB && std::isnan(row->normB));
  const std::string md = renderMarkdown(c);
  const size_t at = md.find("| `" + param + "` | 1 |");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string line = md.substr(at, md.find('\n', at) - at);
  EXPECT_NE(line.find("| NaN |"), std::string::npos) << line;
  const std::string html = renderHtml(c);
  const size_t cell = html.find("<code>" + param + "</code></td><td class=\"num\">1</td>");
  ASSERT_NE(cell, std::string::npos);
  const std::string htmlRow = html.substr(cell, html.find("</tr>", cell) - cell);
  EXPECT_NE(htmlRow.find(">NaN<"), std::string::npos) << htmlRow;
}

// Markdown passes raw HTML through: a run id or label holding markup is shown as text, never
// rendered (it stayed live: `<img src=x onerror=...>`).
TEST(Compare, MarkdownShowsMarkupAsText) {
  auto a = makeRun({.pp = 2});
  auto b = a;
  a.info.runId = "<img src=x onerror=alert(1)>";
  b.info.runId = "b&<script>x</script>";
  b.info.statusReason = "<b>bold</b>";
  const std::string md = renderMarkdown(compareRuns(a, b));
  for (const char* live : {"<img", "<script", "<b>"}) {
    size_t at = md.find(live);
    // Only inside a code span (where Markdown interprets nothing) may the text appear as typed.
    while (at != std::string::npos) {
      const size_t open = md.rfind('`', at), lineStart = md.rfind('\n', at);
      EXPECT_TRUE(open != std::string::npos && (lineStart == std::string::npos || open > lineStart))
          << live << " is live in:\n"
          << md;
      at = md.find(live, at + 1);
    }
  }
}

// A format-1 file (FNV-1a checksums) and a format-3 file of the same data: their checksums
// differ because the functions do, which is evidence of nothing. The comparison judges by
// norms (labelled) and finds them equal; it said DIVERGED ("checksums differ").
TEST(Compare, ChecksumsOfAnotherFunctionAreNotEvidence) {
  auto a = makeRun({.pp = 2, .iterations = 2});
  auto b = a;
  b.info.checksumFunction = events::ChecksumFunction::LegacyFnv1a64;
  for (auto& t : b.transfers) t.checksum ^= 0x5555;  // both sides alike: B is self-consistent
  for (auto& g : b.gradients) g.checksum ^= 0x5555;
  repair(b);
  const auto c = compareRuns(a, b);
  EXPECT_NE(c.verdict, Verdict::Diverged) << c.verdictReason;
  EXPECT_NE(c.evidence.find("norms"), std::string::npos) << c.evidence;
  // The same bytes under the same function are still judged by checksums, and differ.
  b.info.checksumFunction = a.info.checksumFunction;
  EXPECT_EQ(compareRuns(a, b).verdict, Verdict::Diverged);
}

TEST(Compare, ConfigLineDiff) {
  auto d = diffLines("a\nb\nc\nd\n", "a\nc\nx\nd\n");
  std::string s;
  for (const auto& l : d) s += std::string(1, l.op) + l.text + ";";
  EXPECT_EQ(s, " a;-b; c;+x; d;");
}

TEST(Analysis, GatherMarksIncompleteShards) {
  auto run = makeRun({.tp = 2, .pp = 1});
  std::vector<events::GradientRecord> kept;
  for (const auto& g : run.gradients) {
    if (!(g.phase == events::GradPhase::Reduced && g.param == "llm.layers.2.mlp.weight" &&
          g.tp == 1)) {
      kept.push_back(g);
    }
  }
  run.gradients = kept;
  auto gathered = gatherGradients(run, events::GradPhase::Reduced, false);
  bool found = false;
  for (const auto& g : gathered) {
    if (g.param == "llm.layers.2.mlp.weight") {
      found = true;
      EXPECT_FALSE(g.complete);
      EXPECT_EQ(g.shards, 1);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(checkRun(run).exitCode, exit_code::kReferenceGradient);
}
