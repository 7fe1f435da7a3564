#include "storage/Merge.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "storage/Overview.h"
#include "storage/RunFileError.h"
#include "storage/Schema.h"
#include "storage/Sqlite.h"

namespace stagescope::storage {
namespace fs = std::filesystem;

namespace {

// Debian's SQLite allows 10 attached databases; keep one spare.
constexpr int kMaxAttachedPerGroup = 9;

int64_t nowUnixMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string fileName(const std::string& path) {
  return fs::path(path).filename().string();
}

// The rank N of "<run>.rank<N>.shard", or -1.
int rankFromName(const std::string& runName, const std::string& name) {
  const std::string prefix = runName + ".rank";
  const std::string suffix = ".shard";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix))
    return -1;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoi(digits);
}

// Inspects a shard before attaching it: format, and who wrote it.
ShardMergeInfo inspectShard(const std::string& runName, const std::string& path) {
  ShardMergeInfo info;
  info.path = path;
  info.rank = rankFromName(runName, fileName(path));
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    info.state = "missing";
    info.note = path + ": shard file not found";
    return info;
  }
  try {
    // Opening read-write lets SQLite recover the WAL of a writer that was killed.
    Db db = openStagescopeFile(path, true);
    if (!db.hasTable("writer"))
      throw RunFileError(RunFileError::Kind::NotARunFile, path + ": not a shard (no writer table)");
    const int64_t version = db.queryInt("PRAGMA user_version");
    if (version != kSchemaVersion)  // tables and encodings differ between formats
      throw RunFileError(RunFileError::Kind::NotARunFile,
                         path + ": shard format version " + std::to_string(version) +
                             ", expected " + std::to_string(kSchemaVersion) +
                             " (merge it with the stagescope build that wrote it)");
    Stmt w = db.prepare("SELECT rank FROM writer LIMIT 1");
    if (w.step()) info.rank = w.i32(0);
    info.state = "ok";
  } catch (const std::exception& e) {
    info.state = "failed";
    info.note = e.what();
  }
  return info;
}

// Writes (or updates) the shard's row; returns its id.  A shard merged earlier keeps its rows
// and state when it is now missing or unreadable (the rows of the earlier merge stay valid).
int64_t recordShard(Db& db, const ShardMergeInfo& s, const std::string& state,
                    const std::string& level) {
  const bool keepMerged = state != "merging";
  Stmt up = db.prepare(
      std::string("INSERT INTO shards(file, rank, level, state, note) VALUES(?,?,?,?,?) "
                  "ON CONFLICT(file) DO UPDATE SET rank=excluded.rank, level=excluded.level, "
                  "state=excluded.state, note=excluded.note") +
      (keepMerged ? " WHERE shards.state != 'merged'" : ""));
  up.bindText(1, fileName(s.path));
  up.bind(2, int32_t{s.rank});
  up.bindText(3, level);
  up.bindText(4, state);
  if (s.note.empty())
    up.bindNull(5);
  else
    up.bindText(5, s.note);
  up.run();
  Stmt id = db.prepare("SELECT id FROM shards WHERE file = ?");
  id.bindText(1, fileName(s.path));
  return id.step() ? id.i64(0) : -1;
}

// The columns table `table` of `schema` ("main", a shard's alias) holds.
std::set<std::string> columnsOf(Db& db, const std::string& schema, const char* table) {
  Stmt s = db.prepare("SELECT name FROM pragma_table_info(?, ?)");
  s.bindText(1, table);
  s.bindText(2, schema);
  std::set<std::string> out;
  while (s.step()) out.emplace(s.text(0));
  return out;
}

// The data columns of the plain table `t` to copy from the shard `alias` into the run file,
// comma-separated in declaration order: those both hold.  A column added within the format
// (docs/run-file.md: a nullable column does not move it) is missing from a shard or a run file
// an older build wrote: the copy leaves it out, so it is NULL (not recorded) in the run file,
// or not kept where the run file predates it (its readers read the older layout).
std::string copiedColumns(Db& db, const TableDef& t, const std::string& alias) {
  const std::set<std::string> from = columnsOf(db, alias, t.name);
  const std::set<std::string> into = columnsOf(db, "main", t.name);
  std::string out;
  for (const auto& c : t.columns) {
    const std::string name = c.name;
    if (name == "id" || name == "shard_id" || !from.count(name) || !into.count(name)) continue;
    out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

// Copies one attached shard in one transaction; returns the number of rows copied.  Rows of
// an earlier merge of the same shard are deleted first (only when it was seen before: the
// delete scans the table).
int64_t copyShard(Db& db, const std::string& alias, int64_t shardId, bool seenBefore) {
  static const char* kCounted[] = {
      "ranks",         "plan",         "actions",          "transfers",
      "gradients",     "losses",       "inputs",           "diagnoses",
      "collectives",   "waits",        "reference_losses", "reference_gradients",
      "message_roles", "module_steps", "p2p_batches",      "injected_faults"};
  Transaction tx(db);
  std::string update =
      "UPDATE shards SET state='merged', note=NULL, merged_unix_ms=" + std::to_string(nowUnixMs());
  int64_t total = 0;
  for (const char* name : kCounted) {
    // Shards written before a table existed lack it: nothing to copy.
    if (db.queryInt("SELECT count(*) FROM " + alias +
                    ".sqlite_schema WHERE type='table' AND name='" + name + "'") == 0) {
      continue;
    }
    const TableDef& t = tableDef(name);
    const std::string id = std::to_string(shardId);
    const std::string stored = "main." + storedTable(t);
    const std::string source = alias + "." + name;
    if (seenBefore) db.exec("DELETE FROM " + stored + " WHERE shard_id = " + id);
    if (t.packed) {  // text into the dictionary first, then the rows with text ids
      db.exec(collectTextsSql(t, source, "main.texts"));
      db.exec(copyPackedSql(t, source, stored, "main.texts", id));
    } else {
      const std::string cols = copiedColumns(db, t, alias);
      db.exec("INSERT INTO " + stored + "(shard_id, " + cols + ") SELECT " + id + ", " + cols +
              " FROM " + source + " ORDER BY rowid");
    }
    const int64_t n = db.changes();
    total += n;
    // A run file made before a count column existed keeps its shards table as it was.
    if (db.queryInt(
            std::string("SELECT count(*) FROM pragma_table_info('shards') WHERE name = 'n_") +
            name + "'") > 0) {
      update += std::string(", n_") + name + "=" + std::to_string(n);
    }
  }
  // Run-wide facts: the run file's own row (createRunFile) wins over a shard's copy.
  db.exec("INSERT OR IGNORE INTO main.run SELECT * FROM " + alias + ".run");
  db.exec("INSERT OR IGNORE INTO main.modules SELECT * FROM " + alias + ".modules");
  // Tables either file may predate.  A run-wide table is taken from a shard only while the run
  // file has no rows of it (job_schedule has no key to ignore duplicates by; every shard holds
  // the same rows).
  for (const char* runWide : {"run_settings", "module_settings", "run_origin", "job_schedule"}) {
    if (!db.hasTable(runWide) ||
        db.queryInt(std::string("SELECT count(*) FROM ") + alias +
                    ".sqlite_schema WHERE type='table' AND name='" + runWide + "'") == 0)
      continue;
    const std::string into = std::string("main.") + runWide;
    db.exec("INSERT OR IGNORE INTO " + into + " SELECT * FROM " + alias + "." + runWide +
            " WHERE NOT EXISTS (SELECT 1 FROM " + into + ")");
  }
  db.exec(update + " WHERE id = " + std::to_string(shardId));
  tx.commit();
  return total;
}

std::string shardLevel(Db& db, const std::string& alias) {
  Stmt s = db.prepare("SELECT level FROM " + alias + ".writer LIMIT 1");
  return s.step() ? std::string(s.text(0)) : std::string();
}

// (run_id, config_hash) of the `run` row of `schema` ("main" or an attached shard), or
// nullopt when it has none (a shard of an older build, or one not written by a rank).
std::optional<std::pair<std::string, std::string>> identityOf(Db& db, const std::string& schema) {
  Stmt s = db.prepare("SELECT run_id, config_hash FROM " + schema + ".run WHERE id = 1");
  if (!s.step() || s.isNull(0) || s.isNull(1)) return std::nullopt;
  return std::make_pair(std::string(s.text(0)), std::string(s.text(1)));
}

// Why the attached shard belongs to another run than the run file, or "".  A side that names
// no run cannot be compared and is not refused.
std::string foreignReason(Db& db, const std::string& alias, const std::string& file) {
  const auto run = identityOf(db, "main");
  const auto shard = identityOf(db, alias);
  if (!run || !shard) return "";
  if (shard->first != run->first) {
    return file + ": refused: run id '" + shard->first + "' differs from the run file's '" +
           run->first + "' (a shard of another run)";
  }
  if (shard->second != run->second) {
    return file + ": refused: config hash " + shard->second + " differs from the run file's " +
           run->second + " (the rank ran another config)";
  }
  return "";
}

void mergeAttached(Db& db, const std::string& alias, ShardMergeInfo& s) {
  const std::string level = shardLevel(db, alias);
  if (std::string why = foreignReason(db, alias, fileName(s.path)); !why.empty()) {
    s.state = "refused";
    s.note = std::move(why);
    recordShard(db, s, s.state, level);
    return;
  }
  Stmt seen = db.prepare("SELECT 1 FROM shards WHERE file = ?");
  seen.bindText(1, fileName(s.path));
  const bool seenBefore = seen.step();
  seen.reset();
  const int64_t id = recordShard(db, s, "merging", level);
  s.rows = copyShard(db, alias, id, seenBefore);
  s.state = "merged";
}

}  // namespace

std::string shardPathFor(const std::string& runPath, int rank) {
  return runPath + ".rank" + std::to_string(rank) + ".shard";
}

std::vector<std::string> findShards(const std::string& runPath) {
  const fs::path run(runPath);
  const std::string runName = run.filename().string();
  fs::path dir = run.parent_path();
  if (dir.empty()) dir = ".";
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const int rank = rankFromName(runName, name);
    if (rank >= 0) found.emplace_back(rank, (dir / name).string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

void createRunFile(const std::string& path, const events::RunInfo& info) {
  std::error_code ec;
  if (fs::exists(path, ec)) throw std::runtime_error(path + ": run file already exists");
  Db db(path, Db::Mode::Create);
  db.setBusyTimeout(10000);
  Transaction tx(db);
  createSchema(db, FileKind::Run);
  writeRunInfo(db, info);
  tx.commit();
}

void updateRunStatus(const std::string& path, events::RunStatus status, const std::string& reason,
                     int64_t endUnixMs) {
  Db db = openStagescopeFile(path, true);
  Stmt s = db.prepare("UPDATE run SET status=?, status_reason=?, end_unix_ms=? WHERE id=1");
  s.bindText(1, events::toString(status));
  s.bindText(2, reason);
  s.bind(3, endUnixMs);
  s.run();
  if (db.changes() == 0)
    throw RunFileError(RunFileError::Kind::Corrupt, path + ": run file has no run row");
}

namespace {
// The paths in order, each file once: a path naming a file already listed (the same path
// twice, or another name of it: a link, "./x") goes to `duplicates`. Attaching one file twice
// would make SQLite wait on its own lock. A path that cannot be stat()ed is kept (the shard's
// inspection reports it).
std::vector<std::string> uniqueFiles(const std::vector<std::string>& paths,
                                     std::vector<std::string>* duplicates) {
  std::vector<std::string> out;
  std::vector<std::pair<dev_t, ino_t>> seen;
  for (const auto& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
      if (std::find(seen.begin(), seen.end(), id) != seen.end()) {
        duplicates->push_back(p);
        continue;
      }
      seen.push_back(id);
    }
    out.push_back(p);
  }
  return out;
}

// A run file copied or renamed with its shards (a.db -> b.db, a.db.rank0.shard ->
// b.db.rank0.shard) still lists its shards under the old name. Those rows are the same shards:
// before the merge they are renamed to the names being merged, so that merging b.db's shards
// replaces their rows instead of adding every row a second time. A row is renamed only for an
// input named "<run name>.<companion>" (rank<N>.shard, launcher.shard, exits.shard,
// reference.shard) that has no row yet, from the one row of that companion under another name
// that is not itself being merged now.
void adoptRenamedShardRows(Db& db, const std::string& runName,
                           const std::vector<std::string>& inputs) {
  auto companionOf = [](const std::string& file) -> std::string {
    for (const char* fixed : {".launcher.shard", ".exits.shard", ".reference.shard"}) {
      const std::string f = fixed;
      if (file.size() > f.size() && file.compare(file.size() - f.size(), f.size(), f) == 0)
        return f;
    }
    const size_t at = file.rfind(".rank");
    if (at == std::string::npos || at == 0) return "";
    const std::string tail = file.substr(at);  // ".rank<N>.shard"
    return tail.size() > 11 && tail.compare(tail.size() - 6, 6, ".shard") == 0 ? tail : "";
  };
  std::set<std::string> inputNames;
  for (const auto& p : inputs) inputNames.insert(fileName(p));
  std::map<std::string, std::vector<std::pair<int64_t, std::string>>> byCompanion;
  std::set<std::string> rowNames;
  {
    Stmt q = db.prepare("SELECT id, file FROM shards");
    while (q.step()) {
      std::string file(q.text(1));
      rowNames.insert(file);
      const std::string c = companionOf(file);
      if (!c.empty()) byCompanion[c].emplace_back(q.i64(0), std::move(file));
    }
  }
  Transaction tx(db);
  for (const auto& name : inputNames) {
    const std::string companion = companionOf(name);
    if (companion.empty() || name != runName + companion || rowNames.count(name)) continue;
    std::vector<const std::pair<int64_t, std::string>*> others;
    for (const auto& row : byCompanion[companion])
      if (!inputNames.count(row.second)) others.push_back(&row);
    if (others.size() != 1) continue;  // none, or ambiguous: merged as a new shard
    Stmt up = db.prepare("UPDATE shards SET file = ? WHERE id = ?");
    up.bindText(1, name);
    up.bind(2, others.front()->first);
    up.run();
    rowNames.insert(name);
  }
  tx.commit();
}

}  // namespace

MergeResult mergeShards(const std::string& runPath, const std::vector<std::string>& shardPaths,
                        const MergeProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  Db db = openStagescopeFile(runPath, true);
  if (!db.hasTable("shards"))
    throw RunFileError(RunFileError::Kind::NotARunFile,
                       runPath + ": a shard, not a run file (no shards table)");
  if (const int64_t v = db.queryInt("PRAGMA user_version"); v != kSchemaVersion)
    throw RunFileError(RunFileError::Kind::NewerVersion,
                       runPath + ": run file format version " + std::to_string(v) +
                           " is read-only for this build (it writes " +
                           std::to_string(kSchemaVersion) + ")");
  db.exec("PRAGMA cache_size=-65536");
  const std::string runName = fileName(runPath);
  adoptRenamedShardRows(db, runName, shardPaths);

  MergeResult result;
  std::vector<size_t> ready;  // positions of inspectable shards
  std::vector<std::string> duplicates;
  for (const auto& path : uniqueFiles(shardPaths, &duplicates)) {
    result.shards.push_back(inspectShard(runName, path));
    auto& s = result.shards.back();
    if (s.state == "ok")
      ready.push_back(result.shards.size() - 1);
    else
      recordShard(db, s, s.state, "");
  }

  const size_t steps = ready.size() + 2;  // the copies, the indexes, the overview
  size_t done = 0;
  auto advance = [&] {
    if (progress) progress(++done, steps);
  };
  const int limit =
      std::min(kMaxAttachedPerGroup, sqlite3_limit(db.handle(), SQLITE_LIMIT_ATTACHED, -1));
  for (size_t g = 0; g < ready.size(); g += static_cast<size_t>(limit)) {
    const size_t end = std::min(ready.size(), g + static_cast<size_t>(limit));
    std::vector<std::pair<size_t, std::string>> attached;
    for (size_t k = g; k < end; ++k) {
      auto& s = result.shards[ready[k]];
      std::string alias = std::to_string(k - g);
      alias.insert(0, 1, 's');  // (not "s" + …: GCC 12 -Wrestrict false positive)
      try {
        Stmt at = db.prepare("ATTACH DATABASE ? AS " + alias);
        at.bindText(1, s.path);
        at.run();
        attached.emplace_back(ready[k], alias);
      } catch (const std::exception& e) {
        s.state = "failed";
        s.note = e.what();
        recordShard(db, s, s.state, "");
      }
    }
    for (auto& [pos, alias] : attached) {
      auto& s = result.shards[pos];
      try {
        mergeAttached(db, alias, s);
      } catch (const std::exception& e) {
        s.state = "failed";
        s.note = e.what();
        recordShard(db, s, s.state, "");
      }
      advance();
    }
    done += end - g - attached.size();  // shards that could not be attached
    for (auto& [pos, alias] : attached) db.exec("DETACH DATABASE " + alias);
  }
  createIndexes(db);
  advance();
  writeOverview(db);
  advance();

  for (const auto& s : result.shards) {
    if (s.state == "merged") {
      ++result.merged;
      result.rows += s.rows;
    } else {
      (s.state == "missing"   ? result.missing
       : s.state == "refused" ? result.refused
                              : result.failed) += 1;
      result.notes.push_back(s.note);
    }
  }
  for (const auto& d : duplicates)
    result.notes.push_back(d + ": given more than once; merged once");
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

std::vector<std::string> removeMergedShards(const std::string& runPath) {
  std::vector<std::string> files;
  {
    Db db = openStagescopeFile(runPath, false);
    Stmt q = db.prepare("SELECT file FROM shards WHERE state = 'merged'");
    while (q.step()) files.emplace_back(q.text(0));
  }
  const fs::path dir = fs::absolute(runPath).parent_path();
  const std::string prefix = fileName(runPath) + ".";
  std::vector<std::string> removed;
  for (const auto& name : files) {
    const bool companion = name.size() > prefix.size() + 6 && name.rfind(prefix, 0) == 0 &&
                           name.compare(name.size() - 6, 6, ".shard") == 0 &&
                           name.find('/') == std::string::npos;
    if (!companion) continue;
    const fs::path path = dir / name;
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(path, ec))) continue;
    for (const char* suffix : {"-wal", "-shm"}) fs::remove(path.string() + suffix, ec);
    if (fs::remove(path, ec)) removed.push_back(path.string());
  }
  return removed;
}

std::optional<events::RunInfo> readShardRunInfo(const std::string& shardPath) {
  Db db = openStagescopeFile(shardPath, false);
  Stmt s = db.prepare(
      "SELECT run_id, config_text, config_hash, version_stagescope, version_torch FROM run "
      "WHERE id = 1");
  if (!s.step() || s.isNull(0)) return std::nullopt;
  events::RunInfo info;
  info.runId = s.text(0);
  if (!s.isNull(1)) info.configText = s.text(1);
  if (!s.isNull(2)) info.configHash = s.text(2);
  if (!s.isNull(3)) info.versionStagescope = s.text(3);
  if (!s.isNull(4)) info.versionTorch = s.text(4);
  return info;
}

}  // namespace stagescope::storage
