// The planted-defect corpus.  Real runs of tests/debug/configs/pipe3.toml (vision -> llm, three
// ranks) on two layouts, plus runs with engine faults (kill, NaN at the bridge) and a record
// filter; defects planted into copies of the run files through the SQLite API (swapped TP
// shards, one gradient scaled, one message's received bytes corrupted).  For every file: the
// exit code of `check` and `compare`, and the same first divergence / first non-finite from
// the CLI text, the JSON, the HTML (parsed) and the library call the viewer makes
// (analysis::compareRuns / nonFiniteInCausalOrder).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "app/report/CompareReport.h"
#include "core/analysis/Compare.h"
#include "core/analysis/NonFinite.h"
#include "core/events/Checksum.h"
#include "storage/RunReader.h"
#include "tests/debug/DebugUtil.h"
#include "tests/engine/RunHarness.h"

namespace fs = std::filesystem;
using namespace stagescope;
using namespace stagescope::testing;

namespace {

struct Corpus {
  std::string tp2, pp2, killed, filtered, nan, nanTp, swapped, scaled, corrupted;
  std::string steppedWrong, driftedReplica, lossCopy, wrongLoss;
  std::string swappedParam, scaledParam, steppedParam, driftedParam;
};

void exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << (err ? err : "") << "\n"
      << sql;
}

std::string copyOf(const std::string& from, const std::string& tag) {
  std::string to = tempRunPath(tag);
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  return to;
}

std::string scalarText(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(st, 0);
    out = t ? reinterpret_cast<const char*>(t) : "";
  }
  sqlite3_finalize(st);
  return out;
}

// Swap the places of the two TP shards of one reduced gradient (iteration 0): the norm is
// unchanged, the values are wrong.
void plantSwappedShards(const std::string& path, std::string* param) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  *param =
      scalarText(db,
                 "SELECT param FROM gradients WHERE phase='reduced' AND iteration=0 AND "
                 "partition_dim >= 0 AND partition_offset > 0 AND param LIKE '%mlp.fc1.weight' "
                 "ORDER BY param LIMIT 1");
  ASSERT_FALSE(param->empty());
  const std::string off = scalarText(
      db,
      "SELECT partition_offset FROM gradients WHERE phase='reduced' AND iteration=0 AND param='" +
          *param + "' AND partition_offset > 0 LIMIT 1");
  exec(db, "UPDATE gradients SET partition_offset = CASE partition_offset WHEN 0 THEN " + off +
               " ELSE 0 END WHERE phase='reduced' AND iteration=0 AND param='" + *param + "'");
  sqlite3_close(db);
}

// Multiply every copy of one reduced float32 gradient (iteration 0) by 1.5, norm included.
void plantScaledGradient(const std::string& path, std::string* param) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  *param = scalarText(db,
                      "SELECT param FROM gradients WHERE phase='reduced' AND iteration=0 AND "
                      "param LIKE 'llm.%mlp.fc1.weight' ORDER BY param LIMIT 1");
  ASSERT_FALSE(param->empty());
  sqlite3_stmt* sel = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               ("SELECT id, payload FROM gradients WHERE phase='reduced' AND "
                                "iteration=0 AND param='" +
                                *param + "'")
                                   .c_str(),
                               -1, &sel, nullptr),
            SQLITE_OK);
  std::vector<std::pair<int64_t, std::vector<uint8_t>>> rows;
  while (sqlite3_step(sel) == SQLITE_ROW) {
    const auto* b = static_cast<const uint8_t*>(sqlite3_column_blob(sel, 1));
    rows.push_back(
        {sqlite3_column_int64(sel, 0), std::vector<uint8_t>(b, b + sqlite3_column_bytes(sel, 1))});
  }
  sqlite3_finalize(sel);
  ASSERT_FALSE(rows.empty());
  for (auto& [id, bytes] : rows) {
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
      float f;
      std::memcpy(&f, bytes.data() + i, 4);
      f *= 1.5f;
      std::memcpy(bytes.data() + i, &f, 4);
    }
    sqlite3_stmt* up = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE gradients SET payload=?, norm=norm*1.5 WHERE id=?", -1,
                                 &up, nullptr),
              SQLITE_OK);
    sqlite3_bind_blob(up, 1, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(up, 2, id);
    ASSERT_EQ(sqlite3_step(up), SQLITE_DONE);
    sqlite3_finalize(up);
  }
  sqlite3_close(db);
}

// The blob of one float32 row, by id.
std::vector<float> floatsOf(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  std::vector<float> out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const int n = sqlite3_column_bytes(st, 0);
    out.resize(static_cast<size_t>(n) / 4);
    if (n) std::memcpy(out.data(), sqlite3_column_blob(st, 0), out.size() * 4);
  }
  sqlite3_finalize(st);
  return out;
}

// Replaces the float32 payload of gradient row `id`, and its checksum (XXH3-64 of the new
// bytes) when `checksum` is set, as the recording rank would have written them.
void writePayload(sqlite3* db, const std::string& id, const std::vector<float>& values,
                  bool checksum) {
  sqlite3_stmt* up = nullptr;
  const char* sql = checksum ? "UPDATE gradients SET payload=?, checksum=? WHERE id=?"
                             : "UPDATE gradients SET payload=? WHERE id=?";
  ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &up, nullptr), SQLITE_OK);
  int k = 1;
  sqlite3_bind_blob(up, k++, values.data(), static_cast<int>(values.size() * 4), SQLITE_TRANSIENT);
  if (checksum)
    sqlite3_bind_int64(
        up, k++, static_cast<int64_t>(events::checksumBytes(values.data(), values.size() * 4)));
  sqlite3_bind_int64(up, k, std::stoll(id));
  ASSERT_EQ(sqlite3_step(up), SQLITE_DONE);
  sqlite3_finalize(up);
}

// One parameter's optimizer step of the last iteration (1) made 1.5 times as large, on every
// copy (as an engine applying the wrong learning rate to one tensor would record it).  The
// reference of iteration 1 starts from the parameters after iteration 0, so only check's own
// judgement of the step can see it.
void plantWrongStep(const std::string& path, std::string* param) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  *param = scalarText(db,
                      "SELECT param FROM gradients WHERE phase='param_after_step' AND "
                      "iteration=1 AND param LIKE 'llm.%mlp.fc1.weight' ORDER BY param LIMIT 1");
  ASSERT_FALSE(param->empty());
  const std::string rows =
      "FROM gradients WHERE phase='param_after_step' AND param='" + *param + "'";
  const std::string id = scalarText(db, "SELECT id " + rows + " AND iteration=1 LIMIT 1");
  const auto before = floatsOf(db, "SELECT payload " + rows + " AND iteration=0");
  auto after = floatsOf(db, "SELECT payload " + rows + " AND iteration=1");
  ASSERT_EQ(before.size(), after.size());
  ASSERT_FALSE(after.empty());
  for (size_t i = 0; i < after.size(); ++i) after[i] = before[i] + 1.5f * (after[i] - before[i]);
  writePayload(db, id, after, false);
  sqlite3_close(db);
}

// The receiver of llm:pp0->pp1 activation, iteration 0, microbatch 1 recorded other bytes than
// were sent (as a corrupting wire would make it record).
void plantCorruptedMessage(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string where =
      " WHERE edge='llm:pp0->pp1' AND direction='activation' AND iteration=0 AND "
      "microbatch=1 AND side='recv'";
  // Counted first: sqlite3_changes() does not count rows an UPDATE of the (format-3) view
  // changes through its INSTEAD OF trigger.
  ASSERT_EQ(scalarText(db, "SELECT count(*) FROM transfers" + where), "1");
  exec(db,
       "UPDATE transfers SET checksum = (checksum | 1) - (checksum & 1), payload = "
       "CAST(zeroblob(length(payload)) AS BLOB)" +
           where);
  sqlite3_close(db);
}

// The second TP rank's copy of one replicated reduced gradient (a layer norm's; iteration 0)
// drifted by one part in 2^20 of its first element, checksum recomputed: as a replica whose
// all-reduce handed it other bytes would record it.  Far inside the reference's tolerance, and
// the copy reference_gradient and compare read (the first) is untouched.
void plantDriftedReplica(const std::string& path, std::string* param) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string where =
      " FROM gradients WHERE phase='reduced' AND iteration=0 AND partition_dim < 0 AND tp=1 AND "
      "param LIKE 'llm.%ln1.weight' ORDER BY param LIMIT 1";
  *param = scalarText(db, "SELECT param" + where);
  ASSERT_FALSE(param->empty());
  const std::string id = scalarText(db, "SELECT id" + where);
  auto values = floatsOf(db, "SELECT payload" + where);
  ASSERT_FALSE(values.empty());
  values[0] *= 1.0f + std::ldexp(1.0f, -20);
  writePayload(db, id, values, true);
  sqlite3_close(db);
}

// The second TP rank's copy of one microbatch loss (iteration 1, microbatch 2) differs from the
// first's in its last bits.
void plantLossCopy(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string where =
      " WHERE iteration=1 AND microbatch=2 AND rank=(SELECT max(rank) FROM "
      "losses WHERE iteration=1 AND microbatch=2)";
  ASSERT_EQ(scalarText(db, "SELECT count(*) FROM losses WHERE iteration=1 AND microbatch=2"), "2");
  exec(db, "UPDATE losses SET loss = loss * (1 + 1e-12)" + where);
  sqlite3_close(db);
}

// Every copy of one microbatch loss (iteration 1, microbatch 2) off by one part in 10^4, the
// gradients untouched: as an engine that reports a loss other than the one it differentiated
// (a loss scale not undone, a mean over the wrong count) would record it.
void plantWrongLoss(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  exec(db, "UPDATE losses SET loss = loss * (1 + 1e-4) WHERE iteration=1 AND microbatch=2");
  sqlite3_close(db);
}

const Corpus& corpus() {
  static Corpus c = [] {
    Corpus k;
    const std::string cfg = debugConfig("pipe3");
    const std::vector<std::string> full = {"--record", "full", "--set", "timeout_seconds=20"};
    auto run = [&](std::vector<std::string> extra, const std::string& tag, bool mustComplete) {
      std::vector<std::string> args = full;
      args.insert(args.end(), extra.begin(), extra.end());
      RunOutput out = runStagescope(cfg, args, tag, 300);
      if (mustComplete) {
        EXPECT_EQ(out.exitCode, 0) << out.output;
      }
      return out.runPath;
    };
    k.tp2 = run({"--reference", "--set", "modules.llm.tp=2", "--set", "modules.llm.pp=1"},
                "corpus-tp2", true);
    k.pp2 = run({"--reference"}, "corpus-pp2", true);
    k.killed = run({"--fault", "kill:iteration=1,microbatch=0,module=llm,stage=1"}, "corpus-killed",
                   false);
    k.filtered = run({"--set", "record.modules=[\"llm\"]"}, "corpus-filtered", true);
    k.nan = run({"--fault", "nan:iteration=1,microbatch=2,module=vision,direction=activation"},
                "corpus-nan", false);
    // The same NaN with the encoder on two TP ranks (0-1, leader rank 1): its member rank 0
    // gets the poisoned step's gradient only through the leader's boundary broadcast, a
    // collective that is not a recorded message.
    k.nanTp = run({"--set", "modules.vision.tp=2", "--set", "modules.llm.offset=2", "--fault",
                   "nan:iteration=1,microbatch=2,module=vision,direction=activation"},
                  "corpus-nan-tp", false);
    k.swapped = copyOf(k.tp2, "corpus-swapped");
    plantSwappedShards(k.swapped, &k.swappedParam);
    k.scaled = copyOf(k.pp2, "corpus-scaled");
    plantScaledGradient(k.scaled, &k.scaledParam);
    k.steppedWrong = copyOf(k.pp2, "corpus-stepped-wrong");
    plantWrongStep(k.steppedWrong, &k.steppedParam);
    k.corrupted = copyOf(k.pp2, "corpus-corrupted");
    plantCorruptedMessage(k.corrupted);
    k.driftedReplica = copyOf(k.tp2, "corpus-drifted-replica");
    plantDriftedReplica(k.driftedReplica, &k.driftedParam);
    k.lossCopy = copyOf(k.tp2, "corpus-loss-copy");
    plantLossCopy(k.lossCopy);
    k.wrongLoss = copyOf(k.tp2, "corpus-wrong-loss");
    plantWrongLoss(k.wrongLoss);
    return k;
  }();
  return c;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string unescapeHtml(std::string s) {
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"&gt;", ">"}, {"&lt;", "<"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}}) {
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos;) s.replace(p, from.size(), to);
  }
  return s;
}

// `compare A B` through the CLI (text, JSON, HTML) and the library; returns the first
// divergence key every one of them names ("" when none), after checking they agree.
struct CompareOutcome {
  int exitCode = -1;
  std::string verdict, firstKey, text;
};

CompareOutcome compareEverywhere(const std::string& a, const std::string& b,
                                 const std::string& tag) {
  CompareOutcome o;
  const std::string json = tempRunPath(tag) + ".json", html = tempRunPath(tag) + ".html";
  CliResult cli = runCli({"compare", a, b, "--json", json, "--html", html}, 300);
  o.exitCode = cli.exitCode;
  o.text = cli.output;
  const auto j = nlohmann::json::parse(readFile(json));
  o.verdict = j["verdict"];
  EXPECT_EQ(j["exit_code"], cli.exitCode);
  std::string jsonKey = j["first_divergence"].is_null() ? "" : j["first_divergence"]["key"];
  // HTML: <div ... id="first-divergence" data-kind="..." data-key="KEY">
  std::smatch m;
  const std::string page = readFile(html);
  static const std::regex re("id=\"first-divergence\" data-kind=\"[a-z]*\" data-key=\"([^\"]*)\"");
  EXPECT_TRUE(std::regex_search(page, m, re)) << "no first-divergence element in the HTML";
  const std::string htmlKey = m.size() > 1 ? unescapeHtml(m[1]) : "?";
  // The library call the viewer makes, on whole models; the CLI loads only the reduced
  // gradients (storage::LoadOptions::onlyReducedGradients): the same report.
  storage::LoadOptions lo;
  lo.payloads = true;
  auto ra = storage::loadRun(a, lo), rb = storage::loadRun(b, lo);
  analysis::CompareOptions co;
  co.labelA = a;
  co.labelB = b;
  co.filterA = analysis::recordFilterOf(ra);
  co.filterB = analysis::recordFilterOf(rb);
  const auto c = analysis::compareRuns(ra, rb, co);
  EXPECT_EQ(nlohmann::json::parse(report::renderJson(c)), j) << a << " vs " << b;
  const std::string libKey = c.first ? c.first->key : "";
  EXPECT_EQ(analysis::toString(c.verdict), o.verdict);
  EXPECT_EQ(jsonKey, htmlKey);
  EXPECT_EQ(jsonKey, libKey);
  if (!jsonKey.empty()) {
    EXPECT_NE(cli.output.find("First divergence (causal order): " + std::string(c.firstText)),
              std::string::npos)
        << cli.output;
  }
  o.firstKey = jsonKey;
  return o;
}

struct CheckOutcome {
  int exitCode = -1;
  nlohmann::json json;
  std::string text;
};

CheckOutcome checkEverywhere(const std::string& run, const std::string& tag) {
  CheckOutcome o;
  const std::string json = tempRunPath(tag) + ".check.json";
  CliResult cli = runCli({"check", run, "--json", json}, 300);
  o.exitCode = cli.exitCode;
  o.text = cli.output;
  o.json = nlohmann::json::parse(readFile(json));
  EXPECT_EQ(o.json["exit_code"], cli.exitCode);
  return o;
}

const nlohmann::json* checkNamed(const nlohmann::json& j, const std::string& name) {
  for (const auto& c : j["checks"]) {
    if (c["name"] == name) return &c;
  }
  return nullptr;
}

}  // namespace

TEST(Corpus, TwoCorrectLayoutsAreEqualWithinTolerance) {
  const auto& k = corpus();
  auto c = compareEverywhere(k.tp2, k.pp2, "layouts");
  EXPECT_EQ(c.exitCode, 0) << c.text;
  EXPECT_EQ(c.verdict, "equal within tolerance");
  EXPECT_EQ(c.firstKey, "");
  EXPECT_EQ(checkEverywhere(k.tp2, "tp2").exitCode, 0);
  EXPECT_EQ(checkEverywhere(k.pp2, "pp2").exitCode, 0);
}

TEST(Corpus, SwappedTpShardsFailReferenceAndCompare) {
  const auto& k = corpus();
  auto chk = checkEverywhere(k.swapped, "swapped");
  EXPECT_EQ(chk.exitCode, 17) << chk.text;  // reference_gradient, by values
  const auto* ref = checkNamed(chk.json, "reference_gradient");
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ((*ref)["findings"][0]["tensor"], k.swappedParam);
  EXPECT_NE(chk.text.find("by values"), std::string::npos) << chk.text;
  auto same = compareEverywhere(k.tp2, k.swapped, "swapped-same");
  EXPECT_EQ(same.exitCode, 18) << same.text;
  EXPECT_EQ(same.firstKey, k.swappedParam + " it0");
  auto cross = compareEverywhere(k.pp2, k.swapped, "swapped-cross");
  EXPECT_EQ(cross.exitCode, 18) << cross.text;
  EXPECT_EQ(cross.firstKey, k.swappedParam + " it0");
}

TEST(Corpus, ScaledGradientFailsReferenceAndCompare) {
  const auto& k = corpus();
  auto chk = checkEverywhere(k.scaled, "scaled");
  EXPECT_EQ(chk.exitCode, 17) << chk.text;
  auto c = compareEverywhere(k.pp2, k.scaled, "scaled");
  EXPECT_EQ(c.exitCode, 18) << c.text;
  EXPECT_EQ(c.firstKey, k.scaledParam + " it0");
}

// check judges the optimizer step from the run's own parameters and reduced gradients
// (core/analysis/OptimizerStep.h): the correct files have every step judged, and a step 1.5
// times too large in the last iteration fails reference_gradient, naming it.
TEST(Corpus, WrongOptimizerStepFailsReference) {
  const auto& k = corpus();
  const auto good = checkEverywhere(k.pp2, "pp2-steps");
  EXPECT_EQ(good.exitCode, 0) << good.text;
  EXPECT_NE(good.text.find("optimizer steps (adam lr 0.001"), std::string::npos) << good.text;
  auto chk = checkEverywhere(k.steppedWrong, "stepped-wrong");
  EXPECT_EQ(chk.exitCode, 17) << chk.text;
  const auto* ref = checkNamed(chk.json, "reference_gradient");
  ASSERT_NE(ref, nullptr);
  ASSERT_EQ((*ref)["findings"].size(), 1u) << chk.text;
  EXPECT_EQ((*ref)["findings"][0]["tensor"], k.steppedParam);
  EXPECT_EQ((*ref)["findings"][0]["iteration"], 1);
  EXPECT_NE(chk.text.find("is not the configured optimizer's step"), std::string::npos) << chk.text;
}

TEST(Corpus, CorruptedMessageIsAChecksumMismatchAndTheFirstDivergence) {
  const auto& k = corpus();
  auto chk = checkEverywhere(k.corrupted, "corrupted");
  EXPECT_EQ(chk.exitCode, 15) << chk.text;
  auto c = compareEverywhere(k.pp2, k.corrupted, "corrupted");
  EXPECT_EQ(c.exitCode, 18) << c.text;
  EXPECT_EQ(c.firstKey, "llm:pp0->pp1 activation it0 gmb1");
}

// Replicated copies are compared exactly (core/analysis/Replicas.h): the correct tp2 run has
// them compared and equal; a TP copy of a reduced gradient drifted by 2^-20 (far inside the
// reference's tolerance, in a copy the reference does not read) and a TP copy of a loss that
// differs in its last bits each fail checksum_mismatch, naming the tensor and both ranks.
TEST(Corpus, ReplicaCopiesThatDifferFailTheChecksumCheck) {
  const auto& k = corpus();
  const auto good = checkEverywhere(k.tp2, "tp2-replicas");
  EXPECT_EQ(good.exitCode, 0) << good.text;
  EXPECT_NE(good.text.find("replica copies of"), std::string::npos) << good.text;
  auto chk = checkEverywhere(k.driftedReplica, "drifted-replica");
  EXPECT_EQ(chk.exitCode, 15) << chk.text;
  const auto* sum = checkNamed(chk.json, "checksum_mismatch");
  ASSERT_NE(sum, nullptr);
  ASSERT_EQ((*sum)["findings"].size(), 1u) << chk.text;
  EXPECT_EQ((*sum)["findings"][0]["tensor"], k.driftedParam);
  EXPECT_EQ((*sum)["findings"][0]["iteration"], 0);
  EXPECT_NE(chk.text.find("element 0:"), std::string::npos) << chk.text;
  // compare judges each aligned item on one copy; the run whose copies disagree diverged.
  auto c = compareEverywhere(k.tp2, k.driftedReplica, "drifted-replica");
  EXPECT_EQ(c.exitCode, 18) << c.text;
  EXPECT_NE(c.text.find("disagree"), std::string::npos) << c.text;
  auto loss = checkEverywhere(k.lossCopy, "loss-copy");
  EXPECT_EQ(loss.exitCode, 15) << loss.text;
  EXPECT_NE(loss.text.find("tensor-parallel copies of one loss"), std::string::npos) << loss.text;
}

// check judges every recorded loss against the reference's (it recorded them and judged none):
// the correct run has its losses compared; a loss off by 1e-4 on every copy fails
// reference_gradient naming it, and compare diverges on it.
TEST(Corpus, LossesAreJudgedAgainstTheReference) {
  const auto& k = corpus();
  const auto good = checkEverywhere(k.tp2, "tp2-losses");
  EXPECT_EQ(good.exitCode, 0) << good.text;
  EXPECT_NE(good.text.find("losses compared with the reference's"), std::string::npos) << good.text;
  auto chk = checkEverywhere(k.wrongLoss, "wrong-loss");
  EXPECT_EQ(chk.exitCode, 17) << chk.text;
  const auto* ref = checkNamed(chk.json, "reference_gradient");
  ASSERT_NE(ref, nullptr);
  ASSERT_FALSE((*ref)["findings"].empty()) << chk.text;
  EXPECT_EQ((*ref)["findings"][0]["tensor"], "loss");
  EXPECT_EQ((*ref)["findings"][0]["iteration"], 1);
  EXPECT_EQ((*ref)["findings"][0]["microbatch"], 2);
  auto c = compareEverywhere(k.tp2, k.wrongLoss, "wrong-loss");
  EXPECT_EQ(c.exitCode, 18) << c.text;
}

TEST(Corpus, KilledRunIsIncompleteNeverEqual) {
  const auto& k = corpus();
  auto chk = checkEverywhere(k.killed, "killed");
  EXPECT_EQ(chk.exitCode, 10) << chk.text;
  auto c = compareEverywhere(k.pp2, k.killed, "killed");
  EXPECT_EQ(c.exitCode, 19) << c.text;
  EXPECT_EQ(c.verdict, "incomplete");
  auto r = compareEverywhere(k.killed, k.pp2, "killed-rev");
  EXPECT_EQ(r.exitCode, 19) << r.text;
}

TEST(Corpus, RecordFilterChecksWhatWasRecordedAndCompareIsIncomplete) {
  const auto& k = corpus();
  auto chk = checkEverywhere(k.filtered, "filtered");
  EXPECT_EQ(chk.exitCode, 0) << chk.text;
  EXPECT_NE(chk.text.find("record.modules = [llm]"), std::string::npos) << chk.text;
  auto c = compareEverywhere(k.pp2, k.filtered, "filtered");
  EXPECT_EQ(c.exitCode, 19) << c.text;
  EXPECT_EQ(c.verdict, "incomplete");
}

TEST(Corpus, NaNAtTheBridgeIsFirstInCausalOrderEverywhere) {
  const auto& k = corpus();
  auto chk = checkEverywhere(k.nan, "nan");
  const auto* nf = checkNamed(chk.json, "nonfinite");
  ASSERT_NE(nf, nullptr) << chk.text;
  ASSERT_EQ((*nf)["status"], "failed") << chk.text;
  const auto& first = (*nf)["findings"][0];
  EXPECT_EQ(first["edge"], "vision->llm");
  EXPECT_EQ(first["iteration"], 1);
  EXPECT_EQ(first["microbatch"], 2);
  EXPECT_EQ(first["direction"], "activation");
  EXPECT_EQ(first["rank"], 0);  // the sender's record comes first
  // The library call the viewer makes names the same record.
  auto run = storage::loadRun(k.nan);
  auto list = analysis::nonFiniteInCausalOrder(run);
  ASSERT_FALSE(list.empty());
  ASSERT_EQ(list[0].kind, analysis::NonFiniteRecord::Kind::Transfer);
  const auto& t = run.transfers[list[0].index];
  EXPECT_EQ(t.edge, "vision->llm");
  EXPECT_EQ(t.iteration, 1);
  EXPECT_EQ(t.microbatch, 2);
  EXPECT_EQ(t.side, events::Side::Send);
  // compare against the clean run: the first divergence is the poisoned bridge message.
  auto c = compareEverywhere(k.pp2, k.nan, "nan");
  EXPECT_NE(c.exitCode, 0) << c.text;
  EXPECT_EQ(c.firstKey, "vision->llm activation it1 gmb2 to dp0") << c.text;
}

// "First" crosses collectives: with the encoder on two TP ranks, a gradient of the member rank
// (fed through the leader's broadcast, not a recorded message) must never be named before the
// poisoned bridge send that caused it.
TEST(Corpus, NaNAtTheBridgeIsFirstAcrossTheEncodersTpBroadcast) {
  const auto& k = corpus();
  auto run = storage::loadRun(k.nanTp);
  auto list = analysis::nonFiniteInCausalOrder(run);
  ASSERT_FALSE(list.empty());
  ASSERT_EQ(list[0].kind, analysis::NonFiniteRecord::Kind::Transfer);
  const auto& t = run.transfers[list[0].index];
  EXPECT_EQ(t.edge, "vision->llm");
  EXPECT_EQ(t.iteration, 1);
  EXPECT_EQ(t.microbatch, 2);
  EXPECT_EQ(t.side, events::Side::Send);
  auto chk = checkEverywhere(k.nanTp, "nan-tp");
  const auto* nf = checkNamed(chk.json, "nonfinite");
  ASSERT_NE(nf, nullptr) << chk.text;
  EXPECT_EQ((*nf)["findings"][0]["edge"], "vision->llm") << chk.text;
}
