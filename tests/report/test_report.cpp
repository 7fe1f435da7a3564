// Tests of check / compare / export over in-memory fixtures (see Fixture.h).
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
#include "app/report/ChromeTrace.h"
#include "app/report/CompareReport.h"
#include "app/report/Escape.h"
#include "app/report/Progress.h"
#include "core/analysis/Analysis.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"

namespace fs = std::filesystem;
using namespace stagescope;
using namespace stagescope::report;
using namespace stagescope::analysis;
using report::testing::FixtureOptions;
using report::testing::makeRun;
using report::testing::repair;

namespace {

std::string tempPath(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("stagescope_report_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const Finding* firstOf(const CheckReport& r, const std::string& name) {
  const auto* c = r.find(name);
  return c && !c->findings.empty() ? &c->findings.front() : nullptr;
}

int64_t findTransfer(const model::RunModel& run, const std::string& edge, events::Direction dir,
                     int it, int mb, events::Side side) {
  for (size_t i = 0; i < run.transfers.size(); ++i) {
    const auto& t = run.transfers[i];
    if (t.edge == edge && t.direction == dir && t.iteration == it && t.microbatch == mb &&
        t.side == side) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

}  // namespace

// ---- check ------------------------------------------------------------------------------------

TEST(Check, CleanRunPasses) {
  auto run = makeRun({.tp = 2, .pp = 3, .dp = 2, .microbatches = 4, .iterations = 2});
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, 0) << renderCheckText(rep);
  EXPECT_TRUE(rep.passed());
  EXPECT_EQ(rep.checks.size(), 10u);
  for (const auto& c : rep.checks) {
    EXPECT_NE(c.status, CheckStatus::Failed) << c.name;
  }
  EXPECT_EQ(rep.find("reference_gradient")->status, CheckStatus::Passed);
  EXPECT_EQ(rep.find("against")->status, CheckStatus::Skipped);
}

TEST(Check, CorruptedRecvChecksum) {
  auto run = makeRun({.pp = 3});
  int64_t i =
      findTransfer(run, "llm:pp1->pp2", events::Direction::Activation, 0, 2, events::Side::Recv);
  ASSERT_GE(i, 0);
  run.transfers[i].checksum ^= 0xdeadbeef;
  repair(run);
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, exit_code::kChecksumMismatch) << renderCheckText(rep);
  const auto* f = firstOf(rep, "checksum_mismatch");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->name, "checksum_mismatch");
  EXPECT_EQ(f->edge, "llm:pp1->pp2");
  EXPECT_EQ(f->direction, "activation");
  EXPECT_EQ(f->iteration, 0);
  EXPECT_EQ(f->microbatch, 2);
  EXPECT_EQ(f->rank, 2);      // receiver
  EXPECT_EQ(f->peerRank, 1);  // sender
  EXPECT_NE(f->message.find("sender rank 1"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("receiver rank 2"), std::string::npos) << f->message;
  EXPECT_EQ(rep.find("checksum_mismatch")->total, 1);
}

TEST(Check, MissingRecvAndMissingSend) {
  auto run = makeRun({.pp = 2});
  int64_t i =
      findTransfer(run, "llm:pp0->pp1", events::Direction::Gradient, 0, 1, events::Side::Recv);
  ASSERT_GE(i, 0);
  run.transfers.erase(run.transfers.begin() + i);
  repair(run);
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, exit_code::kUnmatchedTransfer) << renderCheckText(rep);
  const auto* f = firstOf(rep, "unmatched_transfer");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("send without receive"), std::string::npos);
  EXPECT_EQ(f->microbatch, 1);
  EXPECT_EQ(f->direction, "gradient");
  // The count check sees the same hole on the receiver.
  EXPECT_EQ(rep.find("message_count")->status, CheckStatus::Failed);

  auto run2 = makeRun({.pp = 2});
  int64_t j =
      findTransfer(run2, "llm:pp0->pp1", events::Direction::Activation, 0, 3, events::Side::Send);
  ASSERT_GE(j, 0);
  run2.transfers.erase(run2.transfers.begin() + j);
  repair(run2);
  auto rep2 = checkRun(run2);
  EXPECT_EQ(rep2.exitCode, exit_code::kUnmatchedTransfer);
  ASSERT_NE(firstOf(rep2, "unmatched_transfer"), nullptr);
  EXPECT_NE(firstOf(rep2, "unmatched_transfer")->message.find("receive without send"),
            std::string::npos);
}

TEST(Check, FirstNaNInCausalOrder) {
  auto run = makeRun({.pp = 3, .microbatches = 4});
  // Origin: the activation of mb1 sent by stage 1 (rank 1) to stage 2.
  auto plant = [&](const std::string& edge, events::Direction d, int mb) {
    for (auto side : {events::Side::Send, events::Side::Recv}) {
      int64_t i = findTransfer(run, edge, d, 0, mb, side);
      ASSERT_GE(i, 0);
      run.transfers[i].stats.nanCount = 7;
    }
  };
  plant("llm:pp1->pp2", events::Direction::Activation, 1);
  // Consequences: the loss of mb1, its backward gradient back to stage 1 and on to stage 0
  // ("llm:pp0->pp1" sorts before "llm:pp1->pp2" in storage order, but is causally later).
  plant("llm:pp1->pp2", events::Direction::Gradient, 1);
  plant("llm:pp0->pp1", events::Direction::Gradient, 1);
  for (auto& l : run.losses) {
    if (l.microbatch == 1) l.loss = NAN;
  }
  repair(run);
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, exit_code::kNonFinite) << renderCheckText(rep);
  const auto* f = firstOf(rep, "nonfinite");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->action, "SF");
  EXPECT_EQ(f->microbatch, 1);
  EXPECT_EQ(f->edge, "llm:pp1->pp2");
  EXPECT_EQ(f->direction, "activation");
  EXPECT_NE(f->message.find("first NaN/Inf in causal order"), std::string::npos) << f->message;
  EXPECT_EQ(rep.find("nonfinite")->total, 7);  // 3 messages x 2 sides + 1 loss
}

TEST(Check, NaNInGradientNamesParameter) {
  auto run = makeRun({.pp = 2});
  for (auto& g : run.gradients) {
    if (g.phase == events::GradPhase::Reduced && g.param == "llm.layers.3.mlp.weight") {
      g.stats.infCount = 1;
    }
  }
  auto rep = checkRun(run);
  const auto* f = firstOf(rep, "nonfinite");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->tensor, "llm.layers.3.mlp.weight");
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->action, "DP_REDUCE");
}

TEST(Check, HungRunWithDiagnosis) {
  auto run = makeRun({.pp = 2});
  run.info.status = events::RunStatus::Hung;
  run.info.statusReason = "watchdog: no progress for 30 s";
  // Rank 1 stops before receiving mb 2.
  auto& acts = run.actions[1];
  size_t cut = 0;
  while (cut < acts.size() &&
         !(acts[cut].kind == events::ActionKind::RecvForward && acts[cut].microbatch == 2)) {
    ++cut;
  }
  acts.resize(cut);
  events::DiagnosisRecord d;
  d.rank = 1;
  d.kind = "hang";
  d.iteration = 0;
  d.actionSeq = static_cast<int>(cut);
  d.waitsOnRank = 0;
  d.message = "rank 1 waits in RF mb2 for rank 0, which waits in RB mb0 for rank 1";
  run.diagnoses.push_back(d);
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, exit_code::kRunStatus) << renderCheckText(rep);
  const auto* c = rep.find("run_status");
  ASSERT_EQ(c->status, CheckStatus::Failed);
  ASSERT_GE(c->findings.size(), 2u);
  EXPECT_NE(c->findings[0].message.find("hung"), std::string::npos);
  EXPECT_NE(c->findings[0].message.find("watchdog"), std::string::npos);
  EXPECT_EQ(c->findings[1].rank, 1);
  EXPECT_EQ(c->findings[1].peerRank, 0);
  EXPECT_EQ(c->findings[1].action, "RF");
  EXPECT_NE(c->findings[1].message.find("waits on rank 0"), std::string::npos);
  // A truncated schedule of a hung run is not a plan deviation; counts are skipped.
  EXPECT_EQ(rep.find("plan_order")->status, CheckStatus::Passed);
  EXPECT_EQ(rep.find("message_count")->status, CheckStatus::Skipped);
}

TEST(Check, PlanOrderDeviation) {
  auto run = makeRun({.pp = 2, .microbatches = 4});
  auto& acts = run.actions[0];
  // Swap two forwards-in-flight on rank 0 (F mb1 before SF mb0).
  size_t i = 0;
  while (!(acts[i].kind == events::ActionKind::SendForward && acts[i].microbatch == 0)) ++i;
  std::swap(acts[i].kind, acts[i + 1].kind);
  std::swap(acts[i].microbatch, acts[i + 1].microbatch);
  std::swap(acts[i].peers, acts[i + 1].peers);
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, exit_code::kPlanOrder) << renderCheckText(rep);
  const auto* f = firstOf(rep, "plan_order");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->rank, 0);
  EXPECT_EQ(f->actionSeq, static_cast<int>(i));
  EXPECT_EQ(rep.find("plan_order")->total, 1);  // first deviation per rank only
}

TEST(Check, MessageCountMismatch) {
  auto run = makeRun({.pp = 2});
  // A duplicated message on both sides: pairs fine, counts differ from the plan.
  std::vector<events::TransferRecord> extra;
  for (const auto& t : run.transfers) {
    if (t.microbatch == 0 && t.direction == events::Direction::Activation) extra.push_back(t);
  }
  run.transfers.insert(run.transfers.end(), extra.begin(), extra.end());
  repair(run);
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, exit_code::kMessageCount) << renderCheckText(rep);
  const auto* f = firstOf(rep, "message_count");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("5 activation sends recorded, the plan implies 4"), std::string::npos)
      << f->message;
}

TEST(Check, ShapeMismatch) {
  auto run = makeRun({.pp = 2});
  int64_t i =
      findTransfer(run, "llm:pp0->pp1", events::Direction::Activation, 0, 0, events::Side::Recv);
  run.transfers[i].shape = {2, 16, 32};
  repair(run);
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, exit_code::kShapeMismatch);
  EXPECT_NE(firstOf(rep, "shape_mismatch")->message.find("[2, 16, 32]"), std::string::npos);
}

TEST(Check, ReferenceGradientMismatchNorms) {
  auto run = makeRun({.tp = 2, .pp = 2});
  for (auto& g : run.gradients) {
    if (g.phase == events::GradPhase::Reduced && g.param == "llm.layers.1.mlp.weight" &&
        g.tp == 1) {
      g.norm *= 1.5;  // one TP shard of one parameter is off
    }
  }
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, exit_code::kReferenceGradient) << renderCheckText(rep);
  const auto* f = firstOf(rep, "reference_gradient");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->tensor, "llm.layers.1.mlp.weight");
  EXPECT_EQ(rep.find("reference_gradient")->total, 1);
  EXPECT_NE(f->message.find("2 shards"), std::string::npos) << f->message;
}

TEST(Check, ReferenceGradientMismatchValues) {
  auto run = makeRun({.tp = 2, .pp = 2, .payloads = true});
  ASSERT_EQ(checkRun(run).exitCode, 0);
  for (auto& g : run.gradients) {
    if (g.phase == events::GradPhase::Reduced && g.param == "llm.layers.0.mlp.weight" &&
        g.tp == 1 && g.dp == 0) {
      float v;
      std::memcpy(&v, g.payload.data() + 4, 4);
      v += 0.5f;
      std::memcpy(g.payload.data() + 4, &v, 4);
    }
  }
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, exit_code::kReferenceGradient) << renderCheckText(rep);
  const auto* f = firstOf(rep, "reference_gradient");
  ASSERT_NE(f, nullptr);
  // Shard tp1 starts at row 4 of [8,4]: its element 1 is full element 17.
  EXPECT_NE(f->message.find("element 17"), std::string::npos) << f->message;
}

TEST(Check, SeverityOrderPicksLowestCode) {
  auto run = makeRun({.pp = 2});
  run.info.status = events::RunStatus::Failed;
  run.info.statusReason = "rank 1 exited with code 134";
  int64_t i =
      findTransfer(run, "llm:pp0->pp1", events::Direction::Activation, 0, 0, events::Side::Recv);
  run.transfers[i].checksum ^= 1;
  repair(run);
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, exit_code::kRunStatus);
  EXPECT_EQ(rep.find("checksum_mismatch")->status, CheckStatus::Failed);
}

TEST(Check, AgainstOtherRun) {
  auto a = makeRun({.pp = 2, .seed = 1});
  auto same = makeRun({.pp = 2, .seed = 1});
  auto other = makeRun({.pp = 2, .seed = 2});
  CheckOptions o;
  o.against = &same;
  EXPECT_EQ(checkRun(a, o).exitCode, 0);
  o.against = &other;
  auto rep = checkRun(a, o);
  EXPECT_EQ(rep.exitCode, exit_code::kAgainst) << renderCheckText(rep);
  const auto* f = firstOf(rep, "against");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->edge, "llm:pp0->pp1");
  EXPECT_EQ(f->iteration, 0);
  EXPECT_EQ(f->microbatch, 0);
  // Tolerance mode: the losses differ by far more than 1e-6.
  o.againstBitwise = false;
  EXPECT_EQ(checkRun(a, o).exitCode, exit_code::kAgainst);
}

TEST(Check, JUnitIsWellFormedWithRightCounts) {
  auto run = makeRun({.pp = 2});
  int64_t i =
      findTransfer(run, "llm:pp0->pp1", events::Direction::Activation, 0, 1, events::Side::Recv);
  run.transfers[i].checksum ^= 1;
  run.transfers[i].edge = "llm:pp0->pp1";
  repair(run);
  auto rep = checkRun(run);
  auto path = tempPath("junit.xml");
  writeJUnit(rep, path);
  std::string xml = readFile(path);
  // Well-formedness: parse with a minimal stack-based XML reader (elements, attributes).
  std::vector<std::string> stack;
  int testcases = 0, failures = 0, skipped = 0;
  size_t p = xml.find("?>");
  ASSERT_NE(p, std::string::npos);
  p += 2;
  while ((p = xml.find('<', p)) != std::string::npos) {
    size_t e = xml.find('>', p);
    ASSERT_NE(e, std::string::npos);
    std::string tag = xml.substr(p + 1, e - p - 1);
    ASSERT_EQ(tag.find('<'), std::string::npos) << "unescaped '<' in " << tag;
    // Attribute values must not contain raw quotes or '&' that is not an entity.
    if (tag[0] == '/') {
      ASSERT_FALSE(stack.empty());
      ASSERT_EQ(stack.back(), tag.substr(1));
      stack.pop_back();
    } else {
      std::string name = tag.substr(0, tag.find_first_of(" /"));
      if (name == "testcase") ++testcases;
      if (name == "failure") ++failures;
      if (name == "skipped") ++skipped;
      if (tag.back() != '/') stack.push_back(name);
    }
    p = e + 1;
  }
  EXPECT_TRUE(stack.empty());
  EXPECT_EQ(testcases, 10);
  EXPECT_EQ(failures, 1);
  EXPECT_EQ(skipped, 1);  // against
  EXPECT_NE(xml.find("<testsuite name=\"stagescope.check\" tests=\"10\" failures=\"1\""),
            std::string::npos);
  EXPECT_NE(xml.find("name=\"checksum_mismatch\""), std::string::npos);
  // JSON and text writers agree.
  auto j = nlohmann::json::parse(renderCheckJson(rep));
  EXPECT_EQ(j["exit_code"], exit_code::kChecksumMismatch);
  EXPECT_EQ(j["checks"].size(), 10u);
  EXPECT_NE(renderCheckText(rep).find("FAIL  checksum_mismatch"), std::string::npos);
}

// The loss rule check and compare share: absolute below 1, relative above. The pair below is
// a correct run's loss and its reference's, measured on the sweep layout small_loss_forward_only
// (1.2e-7 apart, relative 4.6e-6): the purely relative rule failed it against the 1e-6 bound.
TEST(Check, LossDistanceIsAbsoluteBelowOneRelativeAbove) {
  const ToleranceRule rule = toleranceFor("float32");
  EXPECT_LE(lossDistance(0.0252452195, 0.0252451021), rule.bound(ValueKind::Loss, 0));
  EXPECT_GT(lossDistance(4.0 * (1 + 3e-5), 4.0), rule.bound(ValueKind::Loss, 0));  // planted
  EXPECT_GT(lossDistance(0.02525, 0.02525 + 2e-6), rule.bound(ValueKind::Loss, 0));
  EXPECT_NEAR(lossDistance(8.0, 8.0 + 8e-6), 1e-6, 1e-11);  // relative to the larger
  EXPECT_EQ(lossDistance(NAN, NAN), 0);
  EXPECT_TRUE(std::isinf(lossDistance(NAN, 1.0)));
}

// The element rule (Tolerance.h, elementDistance): one element x 1.001 at twice the RMS of a
// 512-element tensor is 8.8e-5 relative L2 (inside 1e-4) but 1e-3 of its scale (over 1e-4); an
// element that cancelled to ~0 is judged against the tensor's RMS, not its own magnitude.  It
// applies to float32 from the same parameters only.
TEST(Check, ElementDistanceIsRelativeToTheTensorsScale) {
  std::vector<double> a(512);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37 * static_cast<double>(i));
  double sq = 0;
  for (double x : a) sq += x * x;
  const double rms = std::sqrt(sq / 512);
  std::vector<double> b = a;
  b[7] = 2 * rms;
  a[7] = 2 * rms * 1.001;
  const ToleranceRule rule = toleranceFor("float32");
  EXPECT_LT(valueDistance(a, b, 0).rel, rule.bound(ValueKind::Gradient, 0));
  const ElementDistance e = elementDistance(a, b, 0);
  EXPECT_EQ(e.worst, 7);
  EXPECT_NEAR(e.ratio, 1e-3 / 1.001, 1e-9);
  EXPECT_GT(e.ratio, rule.elementBound(true));
  // Round-off of 1e-7 in an element that is ~0: 1e-7 / RMS, far inside the bound.
  std::vector<double> c = b;
  c[3] = 1e-9;
  b[3] = 1e-9 + 1e-7;
  a = c;
  EXPECT_LT(elementDistance(a, b, 0).ratio, rule.elementBound(true));
  EXPECT_NEAR(elementDistance(a, b, 0).ratio, 1e-7 / rms, 1e-9);
  EXPECT_EQ(rule.elementBound(false), -1);  // a float32 trajectory
  EXPECT_EQ(toleranceFor("bfloat16").elementBound(true), -1);
  EXPECT_EQ(toleranceFor("float32", 0.5).elementBound(true), -1);  // --tol
}

// The scale rule (Tolerance.h, scaleDeviation): a gradient scaled by 1.2 deviates by 0.2 along
// the reference whatever its noise; noise orthogonal to it does not; the floor keeps a gradient
// that is ~0 from dividing by itself.
TEST(Check, ScaleDeviationSeesAUniformScale) {
  std::vector<double> r = {1, 2, -3, 4}, scaled = r, orthogonal = {1.1, 2, -3, 4 - 0.025};
  for (double& x : scaled) x *= 1.2;
  EXPECT_NEAR(scaleDeviation(scaled, r, 0), 0.2, 1e-12);
  EXPECT_NEAR(scaleDeviation(orthogonal, r, 0), 0, 1e-12);
  EXPECT_NEAR(scaleDeviation({2e-9, 4e-9}, {1e-9, 2e-9}, 1e-3), 5e-12, 1e-15);
  const ToleranceRule bf16 = toleranceFor("bfloat16");
  EXPECT_EQ(bf16.scaleBound(0.001), ToleranceRule::kScaleBase);
  EXPECT_EQ(bf16.scaleBound(0.1), 3 * 0.1);
  EXPECT_EQ(bf16.scaleBound(-1), -1);  // no run-dtype computation
  EXPECT_EQ(toleranceFor("float32").scaleBound(0.1), -1);
}

// Every failure is counted and kept: the text shows the first 20 and says how many more; the
// JSON and JUnit reports list every one (the report once kept 20 per class everywhere).
TEST(Check, EveryFindingIsKeptTextShowsTheFirstTwenty) {
  auto run = makeRun({.pp = 2, .microbatches = 8, .iterations = 3});
  int corrupted = 0;
  for (auto& t : run.transfers) {
    if (t.side == events::Side::Recv) {
      t.checksum ^= 1;
      ++corrupted;
    }
  }
  ASSERT_GT(corrupted, 20);
  repair(run);
  auto rep = checkRun(run);
  const auto* c = rep.find("checksum_mismatch");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->total, corrupted);
  EXPECT_EQ(static_cast<int>(c->findings.size()), corrupted);
  const std::string text = renderCheckText(rep);
  EXPECT_NE(text.find("... and " + std::to_string(corrupted - 20) + " more"), std::string::npos)
      << text;
  auto j = nlohmann::json::parse(renderCheckJson(rep));
  for (const auto& check : j["checks"]) {
    if (check["name"] != "checksum_mismatch") continue;
    EXPECT_EQ(check["total"], corrupted);
    EXPECT_EQ(static_cast<int>(check["findings"].size()), corrupted);
    EXPECT_FALSE(check.contains("findings_not_kept"));
  }
  const std::string xml = renderJUnit(rep);
  EXPECT_EQ(xml.find("more"), std::string::npos);
  size_t lines = 0;
  for (size_t at = xml.find("checksum mismatch on"); at != std::string::npos;
       at = xml.find("checksum mismatch on", at + 1))
    ++lines;
  EXPECT_GE(static_cast<int>(lines), corrupted);
}

// A rank's measured clock offset is information: it never becomes a failure of a run that did
// not complete, nor pushes a real finding out.
TEST(Check, ClockOffsetsAreNotFailures) {
  auto run = makeRun({.pp = 2});
  run.info.status = events::RunStatus::Killed;
  for (int r = 1; r <= 2; ++r) {
    events::DiagnosisRecord d;
    d.rank = r;
    d.kind = "clock";
    d.message = "clock offset to rank 0 (start): measured 10 ns";
    run.diagnoses.push_back(d);
  }
  events::DiagnosisRecord killed;
  killed.rank = 1;
  killed.kind = "rank_failed";
  killed.message = "rank 1 was killed by a signal";
  run.diagnoses.push_back(killed);
  auto rep = checkRun(run);
  const auto* c = rep.find("run_status");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->total, 2) << renderCheckText(rep);  // not completed + the killed rank
  for (const auto& f : c->findings) EXPECT_EQ(f.message.find("clock offset"), std::string::npos);
}

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

// ---- export -----------------------------------------------------------------------------------

TEST(ChromeTrace, ParsesAndPairsFlows) {
  auto run = makeRun({.tp = 2, .pp = 3, .dp = 1, .microbatches = 4});
  run.diagnoses.push_back({1, "fault_injected", 0, 3, -1, "dropped one \"message\"", 0});
  auto path = tempPath("trace.json");
  auto st = writeChromeTrace(run, path);
  auto j = nlohmann::json::parse(readFile(path));
  ASSERT_TRUE(j.contains("traceEvents"));
  const auto& ev = j["traceEvents"];
  std::map<int64_t, int> starts, finishes;
  std::map<std::pair<int, int>, std::pair<double, double>> sliceRange;  // unused bound check
  size_t slices = 0, threadNames = 0, processNames = 0;
  std::set<int> tids;
  for (const auto& e : ev) {
    std::string ph = e["ph"];
    if (ph == "X") {
      ++slices;
      tids.insert(e["tid"].get<int>());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    } else if (ph == "s") {
      starts[e["id"].get<int64_t>()] = e["tid"].get<int>();
    } else if (ph == "f") {
      finishes[e["id"].get<int64_t>()] = e["tid"].get<int>();
      EXPECT_EQ(e["bp"], "e");
    } else if (ph == "M") {
      if (e["name"] == "thread_name") {
        ++threadNames;
        std::string n = e["args"]["name"];
        EXPECT_NE(n.find("tp"), std::string::npos);
        EXPECT_NE(n.find("pp"), std::string::npos);
        EXPECT_NE(n.find("dp"), std::string::npos);
      }
      if (e["name"] == "process_name") ++processNames;
    }
  }
  size_t messages = run.transfers.size() / 2;
  EXPECT_EQ(starts.size(), messages);
  EXPECT_EQ(finishes.size(), messages);
  EXPECT_EQ(st.flows, messages);
  for (const auto& [id, tid] : starts) {
    ASSERT_TRUE(finishes.count(id));
    EXPECT_NE(finishes[id], tid);  // arrows go from one rank to another
  }
  EXPECT_EQ(threadNames, 6u);
  EXPECT_EQ(processNames, 1u);
  EXPECT_EQ(tids.size(), 6u);
  size_t actions = 0;
  for (const auto& l : run.actions) actions += l.size();
  EXPECT_EQ(slices, actions);  // transfers are async slices ("b"/"e"), not on rank tracks
  EXPECT_EQ(j["otherData"]["run_id"], run.info.runId);
}

// ---- misc -------------------------------------------------------------------------------------

TEST(Progress, PlainLinesWhenNotATty) {
  auto path = tempPath("progress.txt");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  {
    Progress p("loading", 1000, f, 0);
    for (int i = 0; i <= 1000; ++i) p.update(static_cast<uint64_t>(i));
    p.finish();
  }
  std::fclose(f);
  std::string s = readFile(path);
  EXPECT_NE(s.find("loading: 50% (500/1000, "), std::string::npos) << s;  // then rate, time left
  EXPECT_NE(s.find("s left)"), std::string::npos) << s;
  EXPECT_NE(s.find("loading: done in"), std::string::npos) << s;
  EXPECT_EQ(s.find('\r'), std::string::npos);
  int lines = 0;
  for (char ch : s) lines += ch == '\n';
  EXPECT_EQ(lines, 12);  // 0%, 10%, ..., 100%, done
}

// On a terminal: one redrawn line with N/total, the rate and the time left.
TEST(Progress, BarSaysHowManyHowFastAndHowLongOnATty) {
  auto path = tempPath("progress-tty.txt");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  {
    Progress p("merging 4 shards", 4, f, 1);
    p.update(1);
    p.finish();
  }
  std::fclose(f);
  const std::string s = readFile(path);
  EXPECT_EQ(s.rfind("\rmerging 4 shards [", 0), 0u) << s;
  EXPECT_NE(s.find(" 1/4, "), std::string::npos) << s;
  EXPECT_NE(s.find("/s, "), std::string::npos) << s;
  EXPECT_NE(s.find(" s left"), std::string::npos) << s;
  EXPECT_NE(s.find("100% 4/4"), std::string::npos) << s;  // the final line: no time left
  EXPECT_EQ(s.back(), '\n');
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

// ---- through a real run file (storage writer, merge, reader) ----------------------------------

namespace {
// Records a fixture run the way the engine does: one shard per rank, then merge.
std::string writeRunFile(const model::RunModel& run, const std::string& name) {
  std::string path = tempPath(name);
  fs::remove(path);
  for (const auto& p : storage::findShards(path)) fs::remove(p);
  auto info = run.info;
  info.status = events::RunStatus::Running;
  storage::createRunFile(path, info);
  std::vector<std::string> shards;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    int rank = static_cast<int>(r);
    shards.push_back(storage::shardPathFor(path, rank));
    auto w = storage::ShardWriter::open(shards.back(), run.info.level, rank);
    w->rank(run.ranks[r]);
    for (const auto& a : run.plan[r]) w->planned(a);
    for (const auto& a : run.actions[r]) w->action(a);
    for (const auto& t : run.transfers) {
      if (t.rank == rank) w->transfer(t);
    }
    for (const auto& g : run.gradients) {
      if (g.rank == rank) w->gradient(g);
    }
    for (const auto& l : run.losses) {
      if (l.rank == rank) w->loss(l);
    }
    for (const auto& d : run.diagnoses) {
      if (d.rank == rank) w->diagnosis(d);
    }
    if (rank == 0) {  // the reference travels with rank 0's shard, into its own tables
      for (const auto& g : run.referenceGradients) w->referenceGradient(g);
      for (const auto& l : run.referenceLosses) w->referenceLoss(l);
    }
    w->close();
    EXPECT_EQ(w->error(), "");
  }
  auto merged = storage::mergeShards(path, shards);
  EXPECT_TRUE(merged.ok());
  storage::updateRunStatus(path, run.info.status, run.info.statusReason, 0);
  return path;
}
}  // namespace

TEST(RunFile, CheckCompareExportThroughTheReader) {
  auto mem = makeRun({.tp = 2, .pp = 2, .dp = 1, .microbatches = 4, .iterations = 2});
  auto path = writeRunFile(mem, "clean.db");
  auto run = storage::loadRun(path);
  ASSERT_EQ(run.transfers.size(), mem.transfers.size());
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, 0) << renderCheckText(rep);
  auto c = compareRuns(run, mem);
  EXPECT_EQ(c.verdict, Verdict::Identical) << c.verdictReason;
  auto st = writeChromeTrace(run, tempPath("file_trace.json"));
  EXPECT_EQ(st.flows, mem.transfers.size() / 2);

  // A corrupted receive recorded into the file is found after the round trip.
  auto bad = mem;
  int64_t i =
      findTransfer(bad, "llm:pp0->pp1", events::Direction::Activation, 1, 2, events::Side::Recv);
  ASSERT_GE(i, 0);
  bad.transfers[i].checksum ^= 0xff;
  auto badRun = storage::loadRun(writeRunFile(bad, "corrupt.db"));
  auto rep2 = checkRun(badRun);
  EXPECT_EQ(rep2.exitCode, exit_code::kChecksumMismatch) << renderCheckText(rep2);
  const auto* f = firstOf(rep2, "checksum_mismatch");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->iteration, 1);
  EXPECT_EQ(f->microbatch, 2);
}

// `compare` loads only the gradients it judges (storage::LoadOptions::comparedGradients:
// reduced and initial ones with payloads, accumulated ones without, no parameters after the
// step); the viewer compares whole models.  Both must give the same comparison, report for
// report, also for two layouts (TP shards gathered) and when the per-microbatch gradients carry
// another dtype than the reduced ones (the tolerance rule follows the reduced gradients in both).
TEST(RunFile, CompareOfReducedGradientsOnlyIsTheWholeRunsComparison) {
  auto withAccumulated = [](model::RunModel run) {
    std::vector<events::GradientRecord> acc;
    for (const auto& g : run.gradients) {
      if (g.phase != events::GradPhase::Reduced) continue;
      for (int mb = 0; mb < run.info.microbatches; ++mb) {
        events::GradientRecord x = g;
        x.phase = events::GradPhase::Accumulated;
        x.microbatch = mb;
        x.norm = g.norm * (mb + 1) / run.info.microbatches;
        x.dtype = "bfloat16";
        x.checksum = g.checksum + static_cast<uint64_t>(mb) + 1;
        acc.push_back(x);
      }
      events::GradientRecord after = g;  // not read by `compare`
      after.phase = events::GradPhase::ParamAfterStep;
      acc.push_back(after);
    }
    run.gradients.insert(run.gradients.end(), acc.begin(), acc.end());
    return run;
  };
  const auto a = writeRunFile(withAccumulated(makeRun({.tp = 2, .pp = 2, .iterations = 2})),
                              "reduced-only-a.db");
  const auto b = writeRunFile(withAccumulated(makeRun({.tp = 1, .pp = 2, .iterations = 2})),
                              "reduced-only-b.db");
  storage::LoadOptions whole;
  whole.payloads = true;
  storage::LoadOptions reduced = whole;
  reduced.comparedGradients = true;
  const auto wa = storage::loadRun(a, whole), wb = storage::loadRun(b, whole);
  const auto ra = storage::loadRun(a, reduced), rb = storage::loadRun(b, reduced);
  ASSERT_LT(ra.gradients.size(), wa.gradients.size());
  ASSERT_GT(ra.gradientsNotLoaded, 0u);
  for (const auto& [x, y] : {std::pair{&wa, &wb}, std::pair{&wb, &wa}}) {
    const auto& rx = x == &wa ? ra : rb;
    const auto& ry = y == &wa ? ra : rb;
    const Comparison cw = compareRuns(*x, *y), cr = compareRuns(rx, ry);
    EXPECT_EQ(renderMarkdown(cw), renderMarkdown(cr));
    EXPECT_EQ(renderJson(cw), renderJson(cr));
    EXPECT_EQ(renderHtml(cw), renderHtml(cr));
    EXPECT_EQ(cw.toleranceRule, toleranceFor("float32").describe());
    EXPECT_GT(cw.gradsCompared, 0u);
  }
}
