// The planted-defect corpus.  Real runs of tests/debug/configs/pipe3.toml (vision -> llm, three
// ranks) on two layouts, plus runs with engine faults (kill, NaN at the bridge) and a record
// filter; defects planted into copies of the run files through the SQLite API (swapped TP
// shards, one gradient scaled, one message's received bytes corrupted).  For every file: the
// exit code of `check` and `compare`, and the same first divergence / first non-finite from
// the CLI text, the JSON, the HTML (parsed) and the library call the viewer makes
// (analysis::compareRuns / nonFiniteInCausalOrder).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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
  std::string tp2, pp2, dp2, killed, filtered, nan, nanTp, swapped, scaled, corrupted;
  std::string steppedWrong, driftedReplica, lossCopy, wrongLoss;
  std::string swappedParam, scaledParam, steppedParam, driftedParam;
  // Records compare did not read, or whose absence nothing noticed (copies of tp2 and dp2).
  std::string meanLoss, initialReplica, initialAll, accumulated, missingCopy;
  std::string initialParam, accumulatedParam, missingParam;
  int accumulatedMb = -1;
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

// Multiplies the float32 payload of gradient row `id` by `factor` and rewrites its checksum,
// norm and statistics from the new values, as the recording rank would have written them: the
// file stays self-consistent, only the semantic defect remains.
void scaleRow(sqlite3* db, const std::string& id, float factor) {
  auto values = floatsOf(db, "SELECT payload FROM gradients WHERE id=" + id);
  ASSERT_FALSE(values.empty()) << "row " << id;
  double mn = INFINITY, mx = -INFINITY, sum = 0, sq = 0;
  for (auto& f : values) {
    f *= factor;
    mn = std::min<double>(mn, f);
    mx = std::max<double>(mx, f);
    sum += f;
    sq += static_cast<double>(f) * f;
  }
  writePayload(db, id, values, true);
  char sql[512];
  std::snprintf(sql, sizeof sql,
                "UPDATE gradients SET norm=%.17g, stat_l2=%.17g, stat_min=%.17g, stat_max=%.17g, "
                "stat_mean=%.17g WHERE id=%s",
                std::sqrt(sq), std::sqrt(sq), mn, mx, sum / static_cast<double>(values.size()),
                id.c_str());
  exec(db, sql);
}

// Every copy of the iteration-0 mean loss (microbatch -1) off by 3e-5 (relative): check's loss
// rule sees it; compare did not read iteration means.
void plantMeanLoss(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_NE(scalarText(db, "SELECT count(*) FROM losses WHERE iteration=0 AND microbatch=-1"), "0");
  exec(db, "UPDATE losses SET loss = loss * (1 + 3e-5) WHERE iteration=0 AND microbatch=-1");
  sqlite3_close(db);
}

// One vision parameter's initial value (param_initial) x 1.001: on DP replica 1 only
// (`everyCopy` false), or on every copy.
void plantInitialParam(const std::string& path, bool everyCopy, std::string* param) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  *param = scalarText(db,
                      "SELECT param FROM gradients WHERE phase='param_initial' AND dp=1 AND "
                      "param LIKE 'vision.%fc1.weight' ORDER BY param LIMIT 1");
  ASSERT_FALSE(param->empty());
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               ("SELECT id FROM gradients WHERE phase='param_initial' AND param='" +
                                *param + "'" + (everyCopy ? "" : " AND dp=1"))
                                   .c_str(),
                               -1, &st, nullptr),
            SQLITE_OK);
  std::vector<std::string> ids;
  while (sqlite3_step(st) == SQLITE_ROW) ids.push_back(std::to_string(sqlite3_column_int64(st, 0)));
  sqlite3_finalize(st);
  ASSERT_EQ(ids.size(), everyCopy ? 2u : 1u);
  for (const auto& id : ids) scaleRow(db, id, 1.001f);
  sqlite3_close(db);
}

// DP replica 1's accumulated gradient of one vision parameter at its last microbatch of
// iteration 0, x 1.01: as a replica that accumulated a microbatch twice-and-a-bit would record
// it, while the reduced gradient (and so the reference's verdict) is untouched.
void plantAccumulated(const std::string& path, std::string* param, int* mb) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  *param = scalarText(db,
                      "SELECT param FROM gradients WHERE phase='accumulated' AND dp=1 AND "
                      "param LIKE 'vision.%fc1.weight' ORDER BY param LIMIT 1");
  ASSERT_FALSE(param->empty());
  const std::string where =
      " FROM gradients WHERE phase='accumulated' AND dp=1 AND iteration=0 "
      "AND param='" +
      *param + "'";
  const std::string last = scalarText(db, "SELECT max(microbatch)" + where);
  ASSERT_FALSE(last.empty());
  *mb = std::stoi(last);
  const std::string id = scalarText(db, "SELECT id" + where + " AND microbatch=" + last);
  scaleRow(db, id, 1.01f);
  sqlite3_close(db);
}

// DP replica 1's copy of one vision parameter's reduced gradient in iteration 1 deleted: the
// copies that remain agree.
void plantMissingCopy(const std::string& path, std::string* param) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  *param = scalarText(db,
                      "SELECT param FROM gradients WHERE phase='reduced' AND dp=1 AND "
                      "param LIKE 'vision.%fc1.weight' ORDER BY param LIMIT 1");
  ASSERT_FALSE(param->empty());
  const std::string where =
      " FROM gradients WHERE phase='reduced' AND iteration=1 AND dp=1 AND "
      "param='" +
      *param + "'";
  ASSERT_EQ(scalarText(db, "SELECT count(*)" + where), "1");
  exec(db, "DELETE FROM gradients_rows WHERE id = (SELECT id" + where + ")");
  ASSERT_EQ(scalarText(db, "SELECT count(*)" + where), "0");
  sqlite3_close(db);
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
    // The encoder on two DP replicas (ranks 0-1, fan-in) feeding the llm's pp2 (ranks 2-3):
    // a copy of every vision tensor on each replica.  About a second.
    k.dp2 = run({"--reference", "--set", "modules.vision.dp=2", "--set", "modules.llm.offset=2"},
                "corpus-dp2", true);
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
    k.meanLoss = copyOf(k.tp2, "corpus-mean-loss");
    plantMeanLoss(k.meanLoss);
    k.initialReplica = copyOf(k.dp2, "corpus-initial-replica");
    plantInitialParam(k.initialReplica, false, &k.initialParam);
    k.initialAll = copyOf(k.dp2, "corpus-initial-all");
    plantInitialParam(k.initialAll, true, &k.initialParam);
    k.accumulated = copyOf(k.dp2, "corpus-accumulated");
    plantAccumulated(k.accumulated, &k.accumulatedParam, &k.accumulatedMb);
    k.missingCopy = copyOf(k.dp2, "corpus-missing-copy");
    plantMissingCopy(k.missingCopy, &k.missingParam);
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

// Two layouts whose messages carry other samples under one key -- the encoder on two replicas
// (each sends half a microbatch: a fan-in) against one (the whole) -- are aligned by the samples
// they carry (docs/analysis.md, "Messages of two layouts").  Each bridge activation is compared
// by values against a reference built here from the run files' rows alone: the two replicas'
// payloads of the microbatch concatenated along the sample dimension ([patches, samples,
// hidden]) in replica order, against the other run's one payload.
TEST(Corpus, MessagesOfTwoLayoutsAlignBySamples) {
  const auto& k = corpus();
  storage::LoadOptions lo;
  lo.payloads = true;
  auto ra = storage::loadRun(k.dp2, lo), rb = storage::loadRun(k.pp2, lo);
  const auto c = analysis::compareRuns(ra, rb, {});
  const auto& al = c.alignment;
  EXPECT_EQ(al.notAlignedByKind[static_cast<size_t>(analysis::ItemKind::Transfer)], 0u);
  sqlite3 *da = nullptr, *db = nullptr;
  ASSERT_EQ(sqlite3_open(k.dp2.c_str(), &da), SQLITE_OK);
  ASSERT_EQ(sqlite3_open(k.pp2.c_str(), &db), SQLITE_OK);
  auto sendOf = [](sqlite3* d, int iteration, int mb, int srcRank, std::string* shape) {
    const std::string where =
        " FROM transfers WHERE edge='vision->llm' AND side='send' AND "
        "direction='activation' AND iteration=" +
        std::to_string(iteration) + " AND microbatch=" + std::to_string(mb) +
        " AND src_rank=" + std::to_string(srcRank) + " LIMIT 1";
    *shape = scalarText(d, "SELECT shape" + where);
    return floatsOf(d, "SELECT payload" + where);
  };
  int judged = 0;
  for (const auto& it : al.items) {
    if (it.kind != analysis::ItemKind::Transfer || it.edge != "vision->llm" ||
        it.direction != events::Direction::Activation)
      continue;
    EXPECT_NE(it.key.find(" samples "), std::string::npos) << it.key;
    ASSERT_EQ(it.evidence, analysis::Evidence::Values) << it.key;
    const auto& ta = ra.transfers[it.a];
    std::string sa0, sa1, sb;
    const auto a0 = sendOf(da, ta.iteration, ta.microbatch, 0, &sa0);  // vision replica 0
    const auto a1 = sendOf(da, ta.iteration, ta.microbatch, 1, &sa1);  // vision replica 1
    const auto b = sendOf(db, ta.iteration, ta.microbatch, 0, &sb);    // the one replica
    // [patches, 1, hidden] twice against [patches, 2, hidden]: interleave per patch.
    ASSERT_EQ(a0.size(), a1.size());
    ASSERT_EQ(a0.size() * 2, b.size()) << sa0 << " " << sb;
    const size_t patches =
        static_cast<size_t>(std::stoll(sb.substr(sb.find_first_of("0123456789"))));
    const size_t hidden = a0.size() / patches;
    double diff = 0, na = 0, nb = 0;
    for (size_t p = 0; p < patches; ++p) {
      for (size_t r = 0; r < 2; ++r) {
        for (size_t h = 0; h < hidden; ++h) {
          const double x = (r == 0 ? a0 : a1)[p * hidden + h];
          const double y = b[(p * 2 + r) * hidden + h];
          diff += (x - y) * (x - y);
          na += x * x;
          nb += y * y;
        }
      }
    }
    const double reference = std::sqrt(diff) / std::max(std::sqrt(na), std::sqrt(nb));
    EXPECT_NEAR(it.distance, reference, 1e-9 + 1e-6 * reference) << it.key;
    EXPECT_TRUE(it.state == analysis::ItemState::Identical ||
                it.state == analysis::ItemState::WithinTolerance)
        << it.key;
    ++judged;
  }
  sqlite3_close(da);
  sqlite3_close(db);
  EXPECT_EQ(judged, 2 * 4) << "two iterations x four microbatches of the bridge's activations";
  // The planted NaN on the one-replica layout is the first divergence against the two-replica
  // one too: the bridge message that carries it, not the losses and gradients after it.
  auto n = compareEverywhere(k.dp2, k.nan, "nan-across-layouts");
  EXPECT_EQ(n.firstKey.rfind("vision->llm activation it1 samples ", 0), 0u) << n.text;
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

// The records compare did not read and the copies nobody counted (docs/analysis.md "What
// compare reads", "Every copy, not one per tensor").  Each assertion failed before: compare
// called every planted file IDENTICAL, and check passed the accumulated and the missing copy.

// The correct files: every new rule judged something and passed.
TEST(Corpus, CompareReadsMeansInitialAndAccumulatedAndCountsCopies) {
  const auto& k = corpus();
  const auto same = compareEverywhere(k.dp2, copyOf(k.dp2, "corpus-dp2-twin"), "dp2-twin");
  EXPECT_EQ(same.exitCode, 0) << same.text;
  EXPECT_EQ(same.verdict, "identical") << same.text;
  EXPECT_NE(same.text.find("of them iteration-mean losses 2, initial parameters"),
            std::string::npos)
      << same.text;
  EXPECT_NE(same.text.find("the same layout: bitwise required"), std::string::npos) << same.text;
  EXPECT_EQ(same.text.find("accumulated gradients 0"), std::string::npos) << same.text;
  // Another vision dp: its accumulated gradients are partial sums of other samples.
  const auto cross = compareEverywhere(k.dp2, k.pp2, "dp2-pp2");
  EXPECT_EQ(cross.exitCode, 0) << cross.text;
  EXPECT_NE(cross.text.find("accumulated gradients not aligned"), std::string::npos) << cross.text;
  const auto good = checkEverywhere(k.dp2, "dp2-accumulation");
  EXPECT_EQ(good.exitCode, 0) << good.text;
  EXPECT_NE(good.text.find("expected reduced-gradient copies recorded"), std::string::npos)
      << good.text;
  EXPECT_NE(good.text.find("reduced gradients equal to what their replicas accumulated"),
            std::string::npos)
      << good.text;
  EXPECT_EQ(good.text.find(" 0 reduced gradients equal to"), std::string::npos) << good.text;
  EXPECT_EQ(good.text.find("not judged (a sum over replicas"), std::string::npos) << good.text;
}

TEST(Corpus, IterationMeanLossIsCompared) {
  const auto& k = corpus();
  const auto chk = checkEverywhere(k.meanLoss, "mean-loss");
  EXPECT_EQ(chk.exitCode, 17) << chk.text;
  const auto c = compareEverywhere(k.tp2, k.meanLoss, "mean-loss");
  EXPECT_EQ(c.exitCode, 18) << c.text;
  EXPECT_EQ(c.verdict, "diverged");
  EXPECT_EQ(c.firstKey, "loss it0 mean") << c.text;
}

TEST(Corpus, InitialParametersAreCompared) {
  const auto& k = corpus();
  // DP replica 1's copy only: the replicas of the initial parameter disagree.
  const auto chk = checkEverywhere(k.initialReplica, "initial-replica");
  EXPECT_EQ(chk.exitCode, 15) << chk.text;
  const auto c = compareEverywhere(k.dp2, k.initialReplica, "initial-replica");
  EXPECT_EQ(c.exitCode, 18) << c.text;
  EXPECT_NE(c.text.find("disagree"), std::string::npos) << c.text;
  // Every copy: the aligned initial parameter differs (same layout: bitwise required).
  const auto all = checkEverywhere(k.initialAll, "initial-all");
  EXPECT_NE(all.exitCode, 0) << all.text;
  const auto ca = compareEverywhere(k.dp2, k.initialAll, "initial-all");
  EXPECT_EQ(ca.exitCode, 18) << ca.text;
  EXPECT_EQ(ca.firstKey, "initial " + k.initialParam) << ca.text;
  EXPECT_NE(ca.text.find("the same layout draws the same bytes: bitwise required"),
            std::string::npos)
      << ca.text;
  // Across layouts the tolerance rule judges it: 1e-3 is over the iteration-0 bound.
  const auto cx = compareEverywhere(k.pp2, k.initialAll, "initial-all-cross");
  EXPECT_EQ(cx.exitCode, 18) << cx.text;
  EXPECT_EQ(cx.firstKey, "initial " + k.initialParam) << cx.text;
  EXPECT_NE(cx.text.find("relative L2 0.000999 > 0.0001"), std::string::npos) << cx.text;
}

TEST(Corpus, AccumulatedGradientIsJudged) {
  const auto& k = corpus();
  const auto chk = checkEverywhere(k.accumulated, "accumulated");
  EXPECT_EQ(chk.exitCode, 17) << chk.text;
  const auto* ref = checkNamed(chk.json, "reference_gradient");
  ASSERT_NE(ref, nullptr);
  ASSERT_EQ((*ref)["findings"].size(), 1u) << chk.text;
  EXPECT_EQ((*ref)["findings"][0]["tensor"], k.accumulatedParam);
  EXPECT_EQ((*ref)["findings"][0]["iteration"], 0);
  EXPECT_NE(chk.text.find("is not what its 2 DP replicas accumulated"), std::string::npos)
      << chk.text;
  const auto c = compareEverywhere(k.dp2, k.accumulated, "accumulated");
  EXPECT_EQ(c.exitCode, 18) << c.text;
  EXPECT_EQ(c.firstKey,
            k.accumulatedParam + " it0 dp1 mb" + std::to_string(k.accumulatedMb) + " accumulated")
      << c.text;
}

TEST(Corpus, MissingDpCopyOfAReducedGradientIsIncomplete) {
  const auto& k = corpus();
  const auto chk = checkEverywhere(k.missingCopy, "missing-copy");
  EXPECT_EQ(chk.exitCode, 10) << chk.text;
  const auto* st = checkNamed(chk.json, "run_status");
  ASSERT_NE(st, nullptr);
  ASSERT_EQ((*st)["findings"].size(), 1u) << chk.text;
  const std::string msg = (*st)["findings"][0]["message"];
  EXPECT_NE(msg.find("reduced gradient " + k.missingParam + " iteration 1: no copy from rank 1"),
            std::string::npos)
      << msg;
  const auto c = compareEverywhere(k.dp2, k.missingCopy, "missing-copy");
  EXPECT_EQ(c.exitCode, 19) << c.text;
  EXPECT_EQ(c.verdict, "incomplete");
  EXPECT_NE(c.text.find("no copy from rank 1"), std::string::npos) << c.text;
  const auto r = compareEverywhere(k.missingCopy, k.dp2, "missing-copy-rev");
  EXPECT_EQ(r.exitCode, 19) << r.text;
}

// ---- inputs: each replica's samples are the ones the layout assigns; the same global batch is
// decided from the samples (issue 30) ----------------------------------------------------------
namespace {

struct InputsCorpus {
  std::string exchanged;  // dp2 with vision replicas 0 and 1's inputs of it0 mb0 exchanged
  std::string llmDp2;     // pipe3 with llm dp2 x micro_batch_size 1: the same 8 samples
  std::string fewer;      // pipe3 with 2 microbatches: 4 samples per iteration
};

// Exchanges the payloads of two input rows (the inputs table has no checksum or statistics:
// the file stays self-consistent).  Vision replicas 0 and 1 (ranks 0 and 1 of dp2), iteration 0,
// microbatch 0: each row now holds the other replica's sample.
void plantExchangedInputs(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string where = "module='vision' AND iteration=0 AND microbatch=0 AND rank=";
  const std::string id0 = scalarText(db, "SELECT id FROM inputs WHERE " + where + "0");
  const std::string id1 = scalarText(db, "SELECT id FROM inputs WHERE " + where + "1");
  ASSERT_FALSE(id0.empty());
  ASSERT_FALSE(id1.empty());
  exec(db, "CREATE TEMP TABLE held AS SELECT payload FROM inputs WHERE id=" + id0);
  exec(db, "UPDATE inputs SET payload=(SELECT payload FROM inputs WHERE id=" + id1 +
               ") WHERE id=" + id0);
  exec(db, "UPDATE inputs SET payload=(SELECT payload FROM held) WHERE id=" + id1);
  sqlite3_close(db);
}

const InputsCorpus& inputsCorpus() {
  static InputsCorpus c = [] {
    InputsCorpus k;
    k.exchanged = copyOf(corpus().dp2, "corpus-exchanged-inputs");
    plantExchangedInputs(k.exchanged);
    const std::string cfg = debugConfig("pipe3");
    auto run = [&](std::vector<std::string> extra, const std::string& tag) {
      std::vector<std::string> args = {"--record", "full", "--set", "timeout_seconds=20"};
      args.insert(args.end(), extra.begin(), extra.end());
      RunOutput out = runStagescope(cfg, args, tag, 300);
      EXPECT_EQ(out.exitCode, 0) << out.output;
      return out.runPath;
    };
    k.llmDp2 = run({"--set", "modules.llm.dp=2", "--set", "micro_batch_size=1"}, "corpus-llm-dp2");
    k.fewer = run({"--set", "microbatches=2"}, "corpus-fewer-samples");
    return k;
  }();
  return c;
}

}  // namespace

TEST(Corpus, ExchangedFanInInputsAreCaughtByCheckAndCompare) {
  const auto& k = corpus();
  const auto& x = inputsCorpus();
  // The correct file: every row holds its assigned samples.
  const auto good = checkEverywhere(k.dp2, "inputs-good");
  EXPECT_EQ(good.exitCode, 0) << good.text;
  EXPECT_NE(good.text.find("samples regenerated from the seed and compared"), std::string::npos)
      << good.text;
  EXPECT_NE(good.text.find("expected input rows recorded"), std::string::npos) << good.text;
  const auto chk = checkEverywhere(x.exchanged, "inputs-exchanged");
  EXPECT_EQ(chk.exitCode, 17) << chk.text;
  const auto* ref = checkNamed(chk.json, "reference_gradient");
  ASSERT_NE(ref, nullptr);
  ASSERT_EQ((*ref)["findings"].size(), 2u) << chk.text;
  const std::string msg = (*ref)["findings"][0]["message"];
  EXPECT_NE(msg.find("rank 0 (vision dp0 tp0) iteration 0 microbatch 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("assigns global sample 0, the row holds global sample 1"), std::string::npos)
      << msg;
  const auto c = compareEverywhere(k.dp2, x.exchanged, "inputs-exchanged");
  EXPECT_EQ(c.exitCode, 18) << c.text;
  EXPECT_EQ(c.verdict, "diverged");
  EXPECT_EQ(c.firstKey, "input vision it0 sample0") << c.text;
  // Across layouts (vision dp1 in pp2) the samples still align by global index.
  const auto cx = compareEverywhere(k.pp2, x.exchanged, "inputs-exchanged-cross");
  EXPECT_EQ(cx.exitCode, 18) << cx.text;
  EXPECT_EQ(cx.firstKey, "input vision it0 sample0") << cx.text;
}

TEST(Corpus, SameSamplesOnAnotherSplitAreComparable) {
  const auto& k = corpus();
  const auto& x = inputsCorpus();
  // llm dp1 x micro_batch_size 2 against llm dp2 x micro_batch_size 1: 8 samples each.
  const auto c = compareEverywhere(k.pp2, x.llmDp2, "same-samples");
  EXPECT_EQ(c.exitCode, 0) << c.text;
  EXPECT_EQ(c.verdict, "equal within tolerance") << c.text;
  EXPECT_NE(c.text.find("same global batch decided by samples"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("microbatch losses not aligned"), std::string::npos) << c.text;
  EXPECT_EQ(c.text.find("input samples: 0 compared"), std::string::npos) << c.text;
  // Another number of samples per iteration is another global batch.
  const auto d = compareEverywhere(k.pp2, x.fewer, "fewer-samples");
  EXPECT_EQ(d.exitCode, 18) << d.text;
  EXPECT_NE(d.text.find("global batch (microbatches x micro_batch_size x llm dp) 8 vs 4 samples"),
            std::string::npos)
      << d.text;
}

// ---- element-wise at level full (docs/analysis.md, "Element-wise at level full") -------------
namespace {

// Multiplies one element of every copy of `param`'s iteration-0 reduced gradient (replicated:
// every TP/DP copy holds the same bytes) by 1.001, rewriting checksum, norm and statistics: the
// element whose magnitude is closest to twice the tensor's RMS, so that its relative L2 stays
// under the 1e-4 bound of the whole tensor (about 2e-3 / sqrt(n)).  Returns the tensor's
// relative L2 from the original and the element's index.
// Rewrites every row of gradients `where` (an SQL condition) through `mutate`, keeping the file
// self-consistent: norm and statistics recomputed from the new values.
void rewriteGradientRows(sqlite3* db, const std::string& where,
                         const std::function<void(std::vector<float>&)>& mutate) {
  std::vector<std::string> ids;
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(
      sqlite3_prepare_v2(db, ("SELECT id FROM gradients WHERE " + where).c_str(), -1, &st, nullptr),
      SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) ids.push_back(std::to_string(sqlite3_column_int64(st, 0)));
  sqlite3_finalize(st);
  EXPECT_FALSE(ids.empty()) << where;
  for (const auto& id : ids) {
    auto v = floatsOf(db, "SELECT payload FROM gradients WHERE id=" + id);
    mutate(v);
    writePayload(db, id, v, true);
    double s = 0, mn = INFINITY, mx = -INFINITY, sum = 0;
    for (float f : v) {
      s += static_cast<double>(f) * f;
      mn = std::min<double>(mn, f);
      mx = std::max<double>(mx, f);
      sum += f;
    }
    char sql[512];
    std::snprintf(sql, sizeof sql,
                  "UPDATE gradients SET norm=%.17g, stat_l2=%.17g, stat_min=%.17g, "
                  "stat_max=%.17g, stat_mean=%.17g WHERE id=%s",
                  std::sqrt(s), std::sqrt(s), mn, mx, sum / static_cast<double>(v.size()),
                  id.c_str());
    exec(db, sql);
  }
}

// Multiplies one element of every copy of `param`'s unsharded reduced gradient (iteration 0) by
// 1.001: an element about twice the tensor's RMS, so the tensor moves less than 1e-4.  Returns
// the relative L2 from the original and the element's index.
std::pair<double, int> plantOneElement(const std::string& path, const std::string& param) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string where =
      "phase='reduced' AND iteration=0 AND param='" + param + "' AND partition_dim < 0";
  auto values = floatsOf(db, "SELECT payload FROM gradients WHERE " + where + " LIMIT 1");
  EXPECT_GT(values.size(), 100u) << param;
  double sq = 0;
  for (float f : values) sq += static_cast<double>(f) * f;
  const double rms = std::sqrt(sq / static_cast<double>(values.size()));
  int pick = 0;
  for (size_t i = 0; i < values.size(); ++i)
    if (std::fabs(std::fabs(values[i]) - 2 * rms) < std::fabs(std::fabs(values[pick]) - 2 * rms))
      pick = static_cast<int>(i);
  const double delta = 0.001 * values[pick];
  rewriteGradientRows(db, where, [pick](std::vector<float>& v) { v[pick] *= 1.001f; });
  sqlite3_close(db);
  return {std::fabs(delta) / std::sqrt(sq), pick};
}

struct ElementDefect {
  std::string path, param;
  double relL2 = 0;
  int element = -1;
};

const ElementDefect& elementDefect() {
  static ElementDefect d = [] {
    ElementDefect e;
    e.param = "llm.head.weight";
    e.path = copyOf(corpus().tp2, "corpus-one-element");
    std::tie(e.relL2, e.element) = plantOneElement(e.path, e.param);
    return e;
  }();
  return d;
}

}  // namespace

// One element x 1.001 of a 512-element gradient is 8.8e-5 relative L2, inside the 1e-4 bound of
// the whole tensor: check passed it and compare called it EQUAL WITHIN TOLERANCE.  At level full
// each element is judged against its scale (1e-3 of it here, bound 1e-4).
TEST(Corpus, OneElementOffByOnePerMilleFailsReferenceAndCompare) {
  const auto& k = corpus();
  const auto& d = elementDefect();
  ASSERT_LT(d.relL2, 1e-4) << "the planted defect must pass the relative L2 bound alone";
  const auto chk = checkEverywhere(d.path, "one-element");
  EXPECT_EQ(chk.exitCode, 17) << chk.text;
  const auto* ref = checkNamed(chk.json, "reference_gradient");
  ASSERT_NE(ref, nullptr);
  ASSERT_EQ((*ref)["findings"].size(), 1u) << chk.text;
  EXPECT_EQ((*ref)["findings"][0]["tensor"], d.param);
  EXPECT_EQ((*ref)["findings"][0]["iteration"], 0);
  const std::string msg = (*ref)["findings"][0]["message"];
  EXPECT_NE(msg.find("element-wise: element " + std::to_string(d.element) + " is"),
            std::string::npos)
      << msg;
  // The same layout and seed, and another layout: iteration 0 starts from the same parameters.
  for (const auto& [other, tag] :
       {std::make_pair(k.tp2, "one-element-same"), std::make_pair(k.pp2, "one-element-cross")}) {
    const auto c = compareEverywhere(other, d.path, tag);
    EXPECT_EQ(c.exitCode, 18) << c.text;
    EXPECT_EQ(c.firstKey, d.param + " it0") << c.text;
    EXPECT_NE(c.text.find("element " + std::to_string(d.element) + " differs by"),
              std::string::npos)
        << c.text;
  }
  // The correct files: every gradient judged element-wise, within the bound.
  const auto good = checkEverywhere(k.tp2, "tp2-elements");
  EXPECT_EQ(good.exitCode, 0) << good.text;
  EXPECT_NE(good.text.find("also element-wise"), std::string::npos) << good.text;
}

// Every copy of an iteration-1 reduced gradient x (1 + 3e-4): 3e-4 relative L2, inside the 1e-3
// bound of iterations >= 1.  Against the same layout and seed (which computes bitwise) compare
// said EQUAL WITHIN TOLERANCE; any difference of values there is another result: DIVERGED.
TEST(Corpus, ASmallScaleOnTheSameLayoutIsADivergence) {
  const auto& k = corpus();
  const std::string path = copyOf(k.tp2, "corpus-scaled-3e-4");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    rewriteGradientRows(db, "phase='reduced' AND iteration=1 AND param='llm.head.weight'",
                        [](std::vector<float>& v) {
                          for (float& f : v) f *= 1.0003f;
                        });
    sqlite3_close(db);
  }
  const auto same = compareEverywhere(k.tp2, path, "scaled-3e-4-same");
  EXPECT_EQ(same.exitCode, 18) << same.text;
  EXPECT_EQ(same.firstKey, "llm.head.weight it1") << same.text;
}
