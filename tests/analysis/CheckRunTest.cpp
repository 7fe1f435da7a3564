// check's verdicts (core/analysis/Check.h) over in-memory runs (tests/report/Fixture.h): each
// class catches its planted defect and passes the clean run; the text and JUnit writers are
// read where a verdict's wording is the product.
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
  d.kind = events::DiagnosisKind::Hang;
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

// A run being written as it was read (CheckOptions::live) is judged a snapshot.  The summary is
// taken by its field, never cut out of the whole line: one that itself holds " (" is said
// whole in run_status, in the text's head and in its result, and JSON keeps the whole line.
TEST(Check, LiveRunIsASnapshotSaidByItsSummary) {
  auto run = makeRun({.pp = 2});
  run.info.status = events::RunStatus::Running;
  CheckOptions opts;
  opts.live = {"live (a test's phrasing), 1 of 2 ranks still writing",
               "r.rank1.shard being written by pid 7 on host h"};
  auto rep = checkRun(run, opts);
  EXPECT_EQ(rep.exitCode, exit_code::kRunStatus) << renderCheckText(rep);
  const auto* c = rep.find("run_status");
  ASSERT_EQ(c->status, CheckStatus::Failed);
  EXPECT_EQ(c->summary,
            "run status is running (live (a test's phrasing), 1 of 2 ranks still writing)");
  ASSERT_EQ(c->findings.size(), 1u) << renderCheckText(rep);  // no "did not complete": a snapshot
  EXPECT_EQ(c->findings[0].message,
            "run has not ended: live (a test's phrasing), 1 of 2 ranks still writing "
            "(r.rank1.shard being written by pid 7 on host h); this is a snapshot, not a "
            "verdict: check again once the run has ended");
  const std::string text = renderCheckText(rep);
  EXPECT_NE(text.find("(status running; live (a test's phrasing), 1 of 2 ranks still writing)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the run is live (a test's phrasing), 1 of 2 ranks still writing; the "
                      "checks above judged a snapshot"),
            std::string::npos)
      << text;
  EXPECT_EQ(nlohmann::json::parse(renderCheckJson(rep))["live"], opts.live.line());
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
    d.kind = events::DiagnosisKind::Clock;
    d.message = "clock offset to rank 0 (start): measured 10 ns";
    run.diagnoses.push_back(d);
  }
  events::DiagnosisRecord killed;
  killed.rank = 1;
  killed.kind = events::DiagnosisKind::RankFailed;
  killed.message = "rank 1 was killed by a signal";
  run.diagnoses.push_back(killed);
  auto rep = checkRun(run);
  const auto* c = rep.find("run_status");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->total, 2) << renderCheckText(rep);  // not completed + the killed rank
  for (const auto& f : c->findings) EXPECT_EQ(f.message.find("clock offset"), std::string::npos);
}
