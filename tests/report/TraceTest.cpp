// The Chrome trace's structure (app/report/ChromeTrace.h): properly nested slices per rank
// track, transfers as async slices, flow arrows inside the send and the receive, never
// backwards.  The hand-made run plants the shapes a real run produces: two receives of one
// action overlapping each other, a receive posted long before its send, and an action whose
// recorded start precedes its predecessor's end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "TraceCheck.h"
#include "app/report/ChromeTrace.h"
#include "core/model/RunModel.h"
#include "tests/support/SyntheticRun.h"

namespace stagescope::report {
namespace {

events::ActionRecord action(int rank, int seq, events::ActionKind kind, int mb, int64_t start,
                            int64_t end) {
  events::ActionRecord a;
  a.rank = rank;
  a.iteration = 0;
  a.seq = seq;
  a.kind = kind;
  a.microbatch = mb;
  a.module = "llm";
  a.stage = rank;
  a.startNs = start;
  a.endNs = end;
  return a;
}

events::TransferRecord transfer(events::Side side, int mb, int seq, int64_t start, int64_t end) {
  events::TransferRecord t;
  t.side = side;
  t.rank = side == events::Side::Send ? 0 : 1;
  t.srcRank = 0;
  t.dstRank = 1;
  t.edge = "llm:pp0->pp1";
  t.iteration = 0;
  t.microbatch = mb;
  t.actionSeq = seq;
  t.startNs = start;
  t.endNs = end;
  return t;
}

model::RunModel plantedRun() {
  using events::ActionKind;
  using events::Side;
  model::RunModel run;
  run.info.modules = {{"llm", "llm", 1, 1, 2, 1, 0, 2, {}}};
  run.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    run.ranks[r].rank = r;
    run.ranks[r].module = "llm";
    run.ranks[r].pp = r;
  }
  // Rank 0 sends mb0 and mb1 in two actions; the second's recorded start is 10 ns early.
  run.actions = {{action(0, 0, ActionKind::SendForward, 0, 1000, 2000),
                  action(0, 1, ActionKind::SendForward, 1, 1990, 3000)},
                 {action(1, 0, ActionKind::RecvForward, 0, 500, 3500)}};
  // Rank 1 receives both in one action: posted early, overlapping each other.
  run.transfers = {transfer(Side::Send, 0, 0, 1100, 1900), transfer(Side::Recv, 0, 0, 600, 2100),
                   transfer(Side::Send, 1, 1, 2100, 2900), transfer(Side::Recv, 1, 0, 1500, 3200)};
  return run;
}

nlohmann::json exportTrace(const model::RunModel& run, const std::string& name,
                           ChromeTraceStats* st) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("stagescope_trace_" + name + ".json")).string();
  *st = writeChromeTrace(run, path);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(path);
  return nlohmann::json::parse(ss.str());
}

TEST(ChromeTraceShape, PlantedOverlapsStayNestedAndArrowsPointForward) {
  ChromeTraceStats st;
  const auto trace = exportTrace(plantedRun(), "planted", &st);
  testing::TraceCounts counts;
  const auto problems = testing::traceProblems(trace, &counts);
  for (const auto& p : problems) ADD_FAILURE() << p;
  EXPECT_EQ(counts.slices, 3u);       // the actions, alone on their rank tracks
  EXPECT_EQ(counts.asyncSlices, 4u);  // every send and receive
  EXPECT_EQ(counts.flows, 2u);
  EXPECT_EQ(st.flows, 2u);
  EXPECT_EQ(st.flowsSkipped, 0u);
}

TEST(ChromeTraceShape, ContradictoryTimesAreCountedNotDrawnBackwards) {
  auto run = plantedRun();
  // The receive of mb0 "completes" before its send's action began (clock offset badly off).
  run.actions[1][0].startNs = 100;
  run.transfers[1].startNs = 150;
  run.transfers[1].endNs = 200;
  ChromeTraceStats st;
  const auto trace = exportTrace(run, "skewed", &st);
  testing::TraceCounts counts;
  for (const auto& p : testing::traceProblems(trace, &counts)) ADD_FAILURE() << p;
  EXPECT_EQ(st.flows, 1u);
  EXPECT_EQ(st.flowsSkipped, 1u);
  EXPECT_EQ(counts.flows, 1u);
}

events::CollectiveRecord collective(int rank, const std::string& op, int seq, int64_t start,
                                    int64_t end) {
  events::CollectiveRecord c;
  c.rank = rank;
  c.iteration = 0;
  c.groupSeq = seq;
  c.op = op;
  c.group = "world";
  c.groupRank = rank;
  c.groupSize = 2;
  c.groupRanks = {0, 1};
  c.reduceOp = op == "all_reduce" ? "sum" : "";
  c.shape = {4};
  c.dtype = "float32";
  c.bytes = 16;
  c.startNs = start;
  c.endNs = end;
  c.state = end ? "completed" : "pending";
  c.outChecksum = end ? 0xabc : 0;
  return c;
}

TEST(ChromeTraceShape, CollectivesAreSlicesPerMemberLinkedAcrossTheGroup) {
  auto run = plantedRun();
  // all_reduce #0 on both ranks (rank 1 joins later); on rank 0 an overlapping broadcast #1
  // (a second lane), which rank 1 never joined: it stays pending to the end of the run.
  run.collectives = {collective(0, "all_reduce", 0, 4000, 6000),
                     collective(0, "broadcast", 1, 4500, 0),
                     collective(1, "all_reduce", 0, 5000, 6100)};
  ChromeTraceStats st;
  const auto trace = exportTrace(run, "collectives", &st);
  for (const auto& p : testing::traceProblems(trace)) ADD_FAILURE() << p;
  EXPECT_EQ(st.collectives, 3u);
  EXPECT_EQ(st.collectiveLinks, 1u);
  EXPECT_EQ(st.collectiveLinksSkipped, 0u);
  std::map<std::string, std::vector<nlohmann::json>> slices;  // name -> member slices
  std::vector<nlohmann::json> links;
  std::set<int64_t> tids;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("cat", "") != "collective") continue;
    if (e["ph"] == "X") {
      slices[e["name"]].push_back(e);
      tids.insert(e["tid"].get<int64_t>());
    } else {
      links.push_back(e);
    }
  }
  ASSERT_EQ(slices["all_reduce world #0 it0"].size(), 2u);
  ASSERT_EQ(slices["broadcast world #1 it0"].size(), 1u);
  EXPECT_EQ(tids.size(), 3u);  // rank 0 lanes 0 and 1, rank 1 lane 0
  const auto& a0 = slices["all_reduce world #0 it0"][0];
  EXPECT_EQ(a0["args"]["op"], "all_reduce");
  EXPECT_EQ(a0["args"]["group"], "world");
  EXPECT_EQ(a0["args"]["bytes"], 16);
  EXPECT_EQ(a0["args"]["reduce_op"], "sum");
  EXPECT_EQ(a0["args"]["group_ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(a0["args"]["members_recorded"], 2);
  EXPECT_EQ(a0["args"]["agreement"], "agree");  // both members' output checksums are 0xabc
  const auto& pending = slices["broadcast world #1 it0"][0];
  EXPECT_EQ(pending["args"]["state"], "pending");
  EXPECT_EQ(pending["args"]["agreement"], "incomplete (a member has no row)");
  // A collective that never completed lasts to the end of the run (6100 ns, from t0 = 500).
  EXPECT_DOUBLE_EQ(pending["ts"].get<double>() + pending["dur"].get<double>(), 5.6);
  // One arrow joins the two members of all_reduce #0, from rank 0's slice to rank 1's, at the
  // moment the last member joined (5000 ns).
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0]["ph"], "s");
  EXPECT_EQ(links[1]["ph"], "f");
  EXPECT_EQ(links[0]["id"], links[1]["id"]);
  EXPECT_EQ(links[0]["tid"], a0["tid"]);
  EXPECT_EQ(links[1]["tid"], slices["all_reduce world #0 it0"][1]["tid"]);
  EXPECT_DOUBLE_EQ(links[0]["ts"].get<double>(), 4.5);
  // On rank 1 the moment is its slice's own start: the arrow lands 1 ns inside it.
  EXPECT_NEAR(links[1]["ts"].get<double>(), 4.501, 1e-9);
}

// Agreement judges the members' data: all_reduce outputs that differ are reported, a
// reduce_scatter's per-member results are not compared.
TEST(ChromeTraceShape, CollectiveAgreementJudgesOutputChecksums) {
  auto run = plantedRun();
  run.collectives = {collective(0, "all_reduce", 0, 4000, 6000),
                     collective(1, "all_reduce", 0, 5000, 6100),
                     collective(0, "reduce_scatter", 1, 6250, 6300),
                     collective(1, "reduce_scatter", 1, 6200, 6400)};
  run.collectives[1].outChecksum = 0xdef;
  run.collectives[3].outChecksum = 0x123;
  ChromeTraceStats st;
  const auto trace = exportTrace(run, "agreement", &st);
  for (const auto& p : testing::traceProblems(trace)) ADD_FAILURE() << p;
  // reduce_scatter: the lower rank (the arrow's start) joined last; the arrow still links.
  EXPECT_EQ(st.collectiveLinks, 2u);
  std::map<std::string, std::set<std::string>> agreement;
  for (const auto& e : trace["traceEvents"])
    if (e.value("cat", "") == "collective" && e["ph"] == "X")
      agreement[e["name"]].insert(e["args"]["agreement"].get<std::string>());
  EXPECT_EQ(agreement["all_reduce world #0 it0"], std::set<std::string>{"differ"});
  EXPECT_EQ(agreement["reduce_scatter world #1 it0"],
            std::set<std::string>{"not compared (per-member results)"});
}

TEST(ChromeTraceShape, CheckerSeesBrokenNestingAndBackwardArrows) {
  // The checker itself must fail on the defects it exists to catch.
  const auto bad = nlohmann::json::parse(R"({"traceEvents":[
    {"ph":"X","name":"a","pid":1,"tid":0,"ts":0,"dur":10},
    {"ph":"X","name":"b","pid":1,"tid":0,"ts":5,"dur":10},
    {"ph":"X","name":"c","pid":1,"tid":1,"ts":0,"dur":20},
    {"ph":"s","id":1,"pid":1,"tid":0,"ts":8},
    {"ph":"f","bp":"e","id":1,"pid":1,"tid":1,"ts":3}]})");
  const auto problems = testing::traceProblems(bad);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("without nesting"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("before its start"), std::string::npos) << problems[1];
}

// A colocated rank (rank 1 holds vision's last stage, audio and llm stage 0): one track for the
// rank, its slices nested, each naming its module; local hand-offs marked as such.
// A run file's names are untrusted bytes: a module and an edge name that are not UTF-8 still
// give a trace a strict JSON parser reads (exportTrace parses with nlohmann, which rejects
// ill-formed UTF-8), each bad byte shown as U+FFFD.
TEST(ChromeTraceShape, NamesThatAreNotUtf8StillGiveValidJson) {
  model::RunModel run = plantedRun();
  const std::string bad = "ll\xFFm\xC0";
  run.info.modules[0].name = bad;
  for (auto& list : run.actions)
    for (auto& a : list) a.module = bad;
  for (auto& t : run.transfers) t.edge = bad + ":pp0->pp1";
  ChromeTraceStats st;
  nlohmann::json trace;
  ASSERT_NO_THROW(trace = exportTrace(run, "not_utf8", &st));
  bool seen = false;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      EXPECT_EQ(e["args"]["module"], "ll\xEF\xBF\xBDm\xEF\xBF\xBD");
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
}

TEST(ChromeTraceShape, ColocatedRankIsOneTrackWithTheModuleInEachSlice) {
  const model::RunModel run = testing::makeSyntheticRun(testing::colocatedSyntheticSpec());
  ChromeTraceStats st;
  const auto trace = exportTrace(run, "colocated", &st);
  testing::TraceCounts counts;
  for (const auto& p : testing::traceProblems(trace, &counts)) ADD_FAILURE() << p;
  size_t actions = 0;
  for (const auto& list : run.actions) actions += list.size();
  EXPECT_EQ(counts.slices, actions);
  std::set<int> threads;
  std::string sharedName;
  std::set<std::string> modulesOnRank1;
  size_t localSides = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") {
      threads.insert(e["tid"].get<int>());
      if (e["tid"] == 1) sharedName = e["args"]["name"];
    }
    if (ph == "X" && e["tid"] == 1) {
      const std::string module = e["args"]["module"];
      modulesOnRank1.insert(module);
      const std::string name = e["name"];
      if (!module.empty()) {
        EXPECT_NE(name.find("[" + module + "]"), std::string::npos) << name;
      }
    }
    if (ph == "b" && e["args"].contains("local")) {
      ++localSides;
      EXPECT_EQ(e["args"]["src"], e["args"]["dst"]);
    }
  }
  EXPECT_EQ(threads, (std::set<int>{0, 1, 2, 3}));  // one track per rank, not per module
  EXPECT_NE(sharedName.find("shared: vision"), std::string::npos) << sharedName;
  EXPECT_NE(sharedName.find("llm tp0 pp0 dp0 stage 2"), std::string::npos) << sharedName;
  EXPECT_EQ(modulesOnRank1, (std::set<std::string>{"", "audio", "vision", "llm"}));
  EXPECT_EQ(localSides, 2u * 2u * 2u * 4u * 2u);  // edges x directions x sides x mb x iterations
}

}  // namespace
}  // namespace stagescope::report
