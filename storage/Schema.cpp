#include "storage/Schema.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

namespace stagescope::storage {
namespace {

const std::vector<ColumnDef> kStatsColumns = {
    {"stat_min", "REAL"},     {"stat_max", "REAL"},          {"stat_mean", "REAL"},
    {"stat_l2", "REAL"},      {"stat_nan_count", "INTEGER"}, {"stat_inf_count", "INTEGER"},
    {"stat_numel", "INTEGER"}};

std::vector<ColumnDef> concat(std::vector<ColumnDef> a, const std::vector<ColumnDef>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<TableDef> makeTables() {
  const ColumnDef shardId{"shard_id", "INTEGER"};
  constexpr Encoding kText = Encoding::Text;
  const std::vector<ColumnDef> actionCols = {
      {"rank", "INTEGER NOT NULL"}, {"iteration", "INTEGER"},  {"seq", "INTEGER"},
      {"kind", "TEXT", kText},      {"microbatch", "INTEGER"}, {"module", "TEXT", kText},
      {"stage", "INTEGER"},         {"peers", "TEXT", kText}};
  std::vector<TableDef> t;
  t.push_back({"run",
               {{"id", "INTEGER PRIMARY KEY CHECK (id = 1)"},
                {"run_id", "TEXT"},
                {"config_text", "TEXT"},
                {"config_hash", "TEXT"},
                {"world_size", "INTEGER"},
                {"iterations", "INTEGER"},
                {"microbatches", "INTEGER"},
                {"level", "TEXT"},
                {"version_stagescope", "TEXT"},
                {"version_torch", "TEXT"},
                {"version_sqlite", "TEXT"},
                {"compiler", "TEXT"},
                {"start_unix_ms", "INTEGER"},
                {"end_unix_ms", "INTEGER"},
                {"status", "TEXT"},
                {"status_reason", "TEXT"},
                {"checksum_function", "TEXT"},
                {"record_iterations", "TEXT"},
                {"record_modules", "TEXT"},
                {"record_ranks", "TEXT"}},
               false});
  t.push_back({"modules",
               {{"name", "TEXT PRIMARY KEY"},
                {"kind", "TEXT"},
                {"tp", "INTEGER"},
                {"cp", "INTEGER"},
                {"pp", "INTEGER"},
                {"dp", "INTEGER"},
                {"rank_offset", "INTEGER"},
                {"layers", "INTEGER"},
                {"downstream", "TEXT"}},
               false});
  // The resolved settings of a stagescope run (events::RunSettings; docs/run-file.md).  Added
  // in format 3 without moving it: a file without these tables records none.
  t.push_back({"run_settings",
               {{"id", "INTEGER PRIMARY KEY CHECK (id = 1)"},
                {"seed", "INTEGER"},
                {"micro_batch_size", "INTEGER"},
                {"dtype", "TEXT"},
                {"forward_only", "INTEGER"},
                {"loss_scale", "REAL"},
                {"optimizer_kind", "TEXT"},
                {"optimizer_lr", "REAL"},
                {"optimizer_momentum", "REAL"},
                {"optimizer_beta1", "REAL"},
                {"optimizer_beta2", "REAL"},
                {"optimizer_eps", "REAL"},
                {"optimizer_weight_decay", "REAL"}},
               false});
  t.push_back({"module_settings",
               {{"name", "TEXT PRIMARY KEY"},
                {"kind", "TEXT"},
                {"dp", "INTEGER"},
                {"patches", "INTEGER"},
                {"patch_dim", "INTEGER"},
                {"text_len", "INTEGER"},
                {"vocab", "INTEGER"}},
               false});
  // What produced the file and, for a captured job, its declared schedule (events::RunOrigin,
  // events::JobStage; one row per rank and module, all ranks' rows in every shard).  Added in
  // format 3 without moving it: a file without these tables says both in comment lines of its
  // config text (RunReader reads them there).
  t.push_back({"run_origin",
               {{"id", "INTEGER PRIMARY KEY CHECK (id = 1)"}, {"origin", "TEXT NOT NULL"}},
               false});
  t.push_back({"job_schedule",
               {{"rank", "INTEGER NOT NULL"},
                {"module", "TEXT NOT NULL"},
                {"stage", "INTEGER"},
                {"global_stage", "INTEGER"},
                {"total_stages", "INTEGER"},
                {"warmup", "INTEGER"}},
               false});
  t.push_back({"ranks",
               {{"rank", "INTEGER NOT NULL"},
                {"module", "TEXT"},
                {"tp", "INTEGER"},
                {"cp", "INTEGER"},
                {"pp", "INTEGER"},
                {"dp", "INTEGER"},
                {"global_stage", "INTEGER"},
                {"total_stages", "INTEGER"},
                {"warmup", "INTEGER"},
                {"host", "TEXT"},
                {"device", "TEXT"},
                {"pid", "INTEGER"},
                {"clock_offset_ns", "INTEGER"},
                {"clock_offset_uncertainty_ns", "INTEGER"},
                shardId},
               true});
  t.push_back({"plan", concat(actionCols, {shardId}), true, true});
  t.push_back({"actions",
               concat(actionCols, {{"start_ns", "INTEGER"}, {"end_ns", "INTEGER"}, shardId}), true,
               true});
  t.push_back(
      {"transfers",
       concat(concat({{"id", "INTEGER PRIMARY KEY"},
                      {"rank", "INTEGER NOT NULL"},
                      {"side", "TEXT", kText},
                      {"src_rank", "INTEGER"},
                      {"dst_rank", "INTEGER"},
                      {"src_group_rank", "INTEGER"},
                      {"dst_group_rank", "INTEGER"},
                      {"edge", "TEXT", kText},
                      {"edge_kind", "TEXT", kText},
                      {"role", "TEXT", kText},
                      {"direction", "TEXT", kText},
                      {"iteration", "INTEGER"},
                      {"microbatch", "INTEGER"},
                      {"action_seq", "INTEGER"},
                      {"shape", "TEXT", kText},
                      {"dtype", "TEXT", kText},
                      {"bytes", "INTEGER"},
                      {"checksum", "INTEGER"}},
                     kStatsColumns),
              {{"start_ns", "INTEGER"}, {"end_ns", "INTEGER"}, {"payload", "BLOB"}, shardId}),
       true, true});
  t.push_back({"gradients",
               concat(concat({{"id", "INTEGER PRIMARY KEY"},
                              {"rank", "INTEGER NOT NULL"},
                              {"iteration", "INTEGER"},
                              {"microbatch", "INTEGER"},
                              {"phase", "TEXT", kText},
                              {"param", "TEXT", kText},
                              {"module", "TEXT", kText},
                              {"tp", "INTEGER"},
                              {"pp", "INTEGER"},
                              {"dp", "INTEGER"},
                              {"partition_dim", "INTEGER"},
                              {"partition_offset", "INTEGER"},
                              {"shape", "TEXT", kText},
                              {"full_shape", "TEXT", kText},
                              {"dtype", "TEXT", kText},
                              {"norm", "REAL", Encoding::NormOrL2},
                              {"checksum", "INTEGER"}},
                             kStatsColumns),
                      {{"payload", "BLOB"}, shardId}),
               true, true});
  t.push_back({"losses",
               {{"rank", "INTEGER NOT NULL"},
                {"iteration", "INTEGER"},
                {"microbatch", "INTEGER"},
                {"dp", "INTEGER"},
                {"loss", "REAL"},
                shardId},
               true});
  t.push_back({"inputs",
               {{"id", "INTEGER PRIMARY KEY"},
                {"rank", "INTEGER NOT NULL"},
                {"iteration", "INTEGER"},
                {"microbatch", "INTEGER"},
                {"module", "TEXT"},
                {"name", "TEXT"},
                {"shape", "TEXT"},
                {"dtype", "TEXT"},
                {"payload", "BLOB"},
                shardId},
               true});
  t.push_back({"diagnoses",
               {{"rank", "INTEGER"},
                {"kind", "TEXT"},
                {"iteration", "INTEGER"},
                {"action_seq", "INTEGER"},
                {"waits_on_rank", "INTEGER"},
                {"message", "TEXT"},
                {"time_ns", "INTEGER"},
                // Added within format 3 (DiagnosisRecord::signal): a file without it, or a row
                // with NULL, has the signal only in its sentence (RunReader reads it there).
                {"signal", "INTEGER"},
                shardId},
               true});
  // Collectives of captured jobs (app/capture): one row per member per collective.
  t.push_back({"collectives",
               concat(concat({{"id", "INTEGER PRIMARY KEY"},
                              {"rank", "INTEGER NOT NULL"},
                              {"iteration", "INTEGER"},
                              {"seq", "INTEGER"},
                              {"group_seq", "INTEGER"},
                              {"op", "TEXT"},
                              {"group_name", "TEXT"},
                              {"group_rank", "INTEGER"},
                              {"group_size", "INTEGER"},
                              {"group_ranks", "TEXT"},
                              {"root", "INTEGER"},
                              {"reduce_op", "TEXT"},
                              {"shape", "TEXT"},
                              {"dtype", "TEXT"},
                              {"bytes", "INTEGER"},
                              {"in_checksum", "INTEGER"},
                              {"out_checksum", "INTEGER"}},
                             kStatsColumns),
                      {{"start_ns", "INTEGER"},
                       {"end_ns", "INTEGER"},
                       {"state", "TEXT"},
                       {"payload", "BLOB"},
                       shardId}),
               true});
  // What each captured message means in the job's call (stagescope_torch.megatron.record_roles):
  // one row per recorded side, keyed by the transfer's (rank, iteration, action_seq, side).
  t.push_back({"message_roles",
               {{"rank", "INTEGER NOT NULL"},
                {"iteration", "INTEGER"},
                {"action_seq", "INTEGER"},
                {"side", "TEXT"},
                {"carries", "TEXT"},
                {"peer", "TEXT"},
                {"call", "TEXT"},
                shardId},
               true});
  // Captured jobs: what each module's reduction and optimizer step assumed (loss
  // normalisation, loss scale, found-inf, skip), core/events/ModuleStep.h.  NULL: not recorded.
  t.push_back({"module_steps",
               {{"rank", "INTEGER NOT NULL"},
                {"iteration", "INTEGER"},
                {"module", "TEXT"},
                {"dp", "INTEGER"},
                {"normalisation", "TEXT"},
                {"microbatches", "INTEGER"},
                {"tokens", "INTEGER"},
                {"global_tokens", "INTEGER"},
                {"loss_scale", "REAL"},
                {"loss_scale_after", "REAL"},
                {"found_inf", "INTEGER"},
                {"skipped", "INTEGER"},
                shardId},
               true});
  // Captured point-to-point ops posted by one batch_isend_irecv (events::BatchMemberRecord);
  // added without moving the format: a file without the table records no batches.
  t.push_back({"p2p_batches",
               {{"rank", "INTEGER NOT NULL"},
                {"iteration", "INTEGER"},
                {"seq", "INTEGER"},
                {"batch", "INTEGER"},
                {"group_ranks", "TEXT"},
                shardId},
               true});
  t.push_back({"waits",
               {{"rank", "INTEGER NOT NULL"},
                {"iteration", "INTEGER"},
                {"action_seq", "INTEGER"},
                {"action", "TEXT"},
                {"microbatch", "INTEGER"},
                {"peer", "INTEGER"},
                {"op", "TEXT"},
                {"edge", "TEXT"},
                {"direction", "TEXT"},
                {"timeout_s", "REAL"},
                {"error", "TEXT"},
                {"time_ns", "INTEGER"},
                shardId},
               true});
  // Planted faults that acted on a rank's send (events::InjectedFaultRecord).  Added within
  // format 3: a file without it has only its `fault_injected` diagnoses (RunReader reads them).
  t.push_back({"injected_faults",
               {{"rank", "INTEGER NOT NULL"},
                {"iteration", "INTEGER"},
                {"action_seq", "INTEGER"},
                {"peer", "INTEGER"},
                {"kinds", "TEXT"},
                {"delay_s", "REAL"},
                {"time_ns", "INTEGER"},
                shardId},
               true});
  // The single-process reference of `run --reference`: never mixed into per-rank tables.
  t.push_back({"reference_losses",
               {{"iteration", "INTEGER"},
                {"microbatch", "INTEGER"},
                {"dp", "INTEGER"},
                {"loss", "REAL"},
                shardId},
               true});
  t.push_back({"reference_gradients",
               concat(concat({{"id", "INTEGER PRIMARY KEY"},
                              {"iteration", "INTEGER"},
                              {"param", "TEXT"},
                              {"module", "TEXT"},
                              {"shape", "TEXT"},
                              {"dtype", "TEXT"},
                              {"norm", "REAL"},
                              {"checksum", "INTEGER"}},
                             kStatsColumns),
                      {{"payload", "BLOB"}, shardId}),
               true});
  // Shard files only: who wrote this shard.
  t.push_back(
      {"writer",
       {{"rank", "INTEGER"}, {"level", "TEXT"}, {"pid", "INTEGER"}, {"opened_unix_ms", "INTEGER"}},
       false});
  // Run files only: which shards were merged and how far.
  t.push_back({"shards",
               {{"id", "INTEGER PRIMARY KEY"},
                {"file", "TEXT NOT NULL UNIQUE"},
                {"rank", "INTEGER"},
                {"level", "TEXT"},
                {"state", "TEXT NOT NULL"},
                {"note", "TEXT"},
                {"n_ranks", "INTEGER"},
                {"n_plan", "INTEGER"},
                {"n_actions", "INTEGER"},
                {"n_transfers", "INTEGER"},
                {"n_gradients", "INTEGER"},
                {"n_losses", "INTEGER"},
                {"n_inputs", "INTEGER"},
                {"n_diagnoses", "INTEGER"},
                {"n_collectives", "INTEGER"},
                {"merged_unix_ms", "INTEGER"},
                {"n_waits", "INTEGER"},
                {"n_message_roles", "INTEGER"},
                {"n_reference_losses", "INTEGER"},
                {"n_reference_gradients", "INTEGER"},
                {"n_module_steps", "INTEGER"},
                {"n_p2p_batches", "INTEGER"}},
               false});
  return t;
}

bool isKeyColumn(const ColumnDef& c) {
  std::string_view n = c.name;
  return n == "id" || n == "shard_id";
}

template <typename Enum, typename ToString>
bool parseEnum(std::string_view t, Enum* out, int count, ToString toStr) {
  for (int i = 0; i < count; ++i) {
    auto e = static_cast<Enum>(i);
    if (t == toStr(e)) {
      *out = e;
      return true;
    }
  }
  return false;
}

template <typename T>
void appendListT(std::string& out, const std::vector<T>& values) {
  char buf[24];
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out.push_back(',');
    auto r = std::to_chars(buf, buf + sizeof buf, values[i]);
    out.append(buf, r.ptr);
  }
}

template <typename T>
bool parseListT(std::string_view text, std::vector<T>* out) {
  out->clear();
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    T v{};
    auto r = std::from_chars(p, end, v);
    if (r.ec != std::errc()) return false;
    out->push_back(v);
    p = r.ptr;
    if (p < end) {
      if (*p != ',') return false;
      ++p;
    }
  }
  return true;
}

uint32_t bigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// The header records the database size in pages (valid when the change counter equals the
// version-valid-for number).  Without a WAL file, a shorter file was truncated.
void checkNotTruncated(const std::string& path, const unsigned char* header) {
  std::error_code ec;
  if (std::filesystem::exists(path + "-wal", ec)) return;
  uint64_t pageSize = (uint32_t{header[16]} << 8) | header[17];
  if (pageSize == 1) pageSize = 65536;
  const uint64_t pages = bigEndian32(header + 28);
  if (pages == 0 || bigEndian32(header + 24) != bigEndian32(header + 92)) return;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (!ec && size < pages * pageSize)
    throw RunFileError(RunFileError::Kind::Corrupt, path + ": truncated: " + std::to_string(size) +
                                                        " bytes, header says " +
                                                        std::to_string(pages * pageSize));
}

// The stored value of logical column `c` of the row `row` ("NEW." in a trigger, "src." in the
// merge), looking text up in `textsTable`.
std::string encodeExpr(const ColumnDef& c, const std::string& row, const std::string& textsTable) {
  const std::string v = row + c.name;
  switch (c.encoding) {
    case Encoding::Text:
      return "(SELECT id FROM " + textsTable + " WHERE text = " + v + ")";
    case Encoding::NormOrL2:
      return "CASE WHEN " + v + " IS " + row + "stat_l2 THEN NULL ELSE " + v + " END";
    case Encoding::Plain:
      break;
  }
  return v;
}

// The logical value of `c` read from the stored row `r`.
std::string decodeExpr(const ColumnDef& c) {
  switch (c.encoding) {
    case Encoding::Text:
      return "(SELECT text FROM texts WHERE texts.id = r." + storedColumn(c) + ")";
    case Encoding::NormOrL2:
      return "coalesce(r.norm, r.stat_l2)";
    case Encoding::Plain:
      break;
  }
  return std::string("r.") + c.name;
}

// A packed table of the run file: `<name>_rows` (an INTEGER PRIMARY KEY `id` first, even where
// the logical table has none), the view `<name>` with the logical columns (and `id`), and
// INSTEAD OF triggers that make INSERT / UPDATE / DELETE on the view act on the stored rows.
std::string packedSchemaSql(const TableDef& t) {
  const std::string name = t.name;
  const std::string rows = storedTable(t);
  std::string stored = "id INTEGER PRIMARY KEY", view = "r.id AS id", texts, cols, values, sets;
  for (const auto& c : t.columns) {
    if (std::string_view(c.name) == "id") continue;
    const std::string type = c.encoding == Encoding::Text ? "INTEGER" : c.type;
    stored += ", " + storedColumn(c) + " " + type;
    view += ", " + decodeExpr(c) + " AS " + c.name;
    if (c.encoding == Encoding::Text)
      texts += (texts.empty() ? "(NEW." : ", (NEW.") + std::string(c.name) + ")";
    cols += ", " + storedColumn(c);
    values += ", " + encodeExpr(c, "NEW.", "texts");
    sets += (sets.empty() ? "" : ", ") + storedColumn(c) + " = " + encodeExpr(c, "NEW.", "texts");
  }
  const std::string addTexts = "INSERT OR IGNORE INTO texts(text) VALUES " + texts + "; ";
  std::string sql = "CREATE TABLE IF NOT EXISTS " + rows + " (" + stored + ");\n";
  sql += "CREATE VIEW IF NOT EXISTS " + name + " AS SELECT " + view + " FROM " + rows + " AS r;\n";
  sql += "CREATE TRIGGER IF NOT EXISTS " + name + "_insert INSTEAD OF INSERT ON " + name +
         " BEGIN " + addTexts + "INSERT INTO " + rows + "(id" + cols + ") VALUES (NEW.id" + values +
         "); END;\n";
  sql += "CREATE TRIGGER IF NOT EXISTS " + name + "_update INSTEAD OF UPDATE ON " + name +
         " BEGIN " + addTexts + "UPDATE " + rows + " SET " + sets + " WHERE id = OLD.id; END;\n";
  sql += "CREATE TRIGGER IF NOT EXISTS " + name + "_delete INSTEAD OF DELETE ON " + name +
         " BEGIN DELETE FROM " + rows + " WHERE id = OLD.id; END;\n";
  return sql;
}

}  // namespace

const std::vector<TableDef>& allTables() {
  static const std::vector<TableDef> tables = makeTables();
  return tables;
}

const TableDef& tableDef(std::string_view name) {
  for (const auto& t : allTables())
    if (name == t.name) return t;
  throw std::logic_error("no table " + std::string(name));
}

std::string dataColumns(const TableDef& table) {
  std::string out;
  for (const auto& c : table.columns) {
    if (isKeyColumn(c)) continue;
    if (!out.empty()) out += ", ";
    out += c.name;
  }
  return out;
}

std::string insertSql(const TableDef& table, const char* verb, int rows) {
  std::string marks;
  for (const auto& c : table.columns) {
    if (isKeyColumn(c)) continue;
    marks += marks.empty() ? "?" : ",?";
  }
  std::string sql =
      std::string(verb) + " INTO " + table.name + "(" + dataColumns(table) + ") VALUES";
  for (int r = 0; r < rows; ++r) sql += (r ? ",(" : "(") + marks + ")";
  return sql;
}

int dataColumnCount(const TableDef& table) {
  int n = 0;
  for (const auto& c : table.columns) n += isKeyColumn(c) ? 0 : 1;
  return n;
}

void createSchema(Db& db, FileKind kind) {
  std::string sql = "PRAGMA application_id = " + std::to_string(kApplicationId) +
                    "; PRAGMA user_version = " + std::to_string(kSchemaVersion) + ";\n";
  const bool run = kind == FileKind::Run;
  if (run)
    sql +=
        "CREATE TABLE IF NOT EXISTS texts (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);\n";
  for (const auto& t : allTables()) {
    std::string_view name = t.name;
    if (name == "writer" && kind != FileKind::Shard) continue;
    if (name == "shards" && kind != FileKind::Run) continue;
    if (run && t.packed) {
      sql += packedSchemaSql(t);
      continue;
    }
    sql += "CREATE TABLE IF NOT EXISTS " + std::string(t.name) + " (";
    for (size_t i = 0; i < t.columns.size(); ++i) {
      sql += (i ? ", " : "") + std::string(t.columns[i].name) + " " + t.columns[i].type;
    }
    sql += ");\n";
  }
  db.exec(sql);
}

void createIndexes(Db& db) {
  // Only what queries by logical key need; the reader scans in rowid order and sorts itself.
  // Text keys are the packed ids (small integers), not the text.
  db.exec(
      "CREATE INDEX IF NOT EXISTS actions_by_rank ON actions_rows(rank, iteration, seq);"
      "CREATE INDEX IF NOT EXISTS transfers_by_key ON transfers_rows(iteration, microbatch, "
      "edge_id, direction_id, src_rank, dst_rank, side_id);"
      "CREATE INDEX IF NOT EXISTS gradients_by_param ON gradients_rows(iteration, phase_id, "
      "param_id);"
      "CREATE INDEX IF NOT EXISTS losses_by_iteration ON losses(iteration, microbatch);");
}

std::string storedTable(const TableDef& table) {
  return table.packed ? std::string(table.name) + "_rows" : std::string(table.name);
}

std::string storedColumn(const ColumnDef& column) {
  return column.encoding == Encoding::Text ? std::string(column.name) + "_id"
                                           : std::string(column.name);
}

std::string storedReadExpr(const TableDef& table, std::string_view column) {
  for (const auto& c : table.columns) {
    if (column != c.name) continue;
    if (!table.packed) return c.name;
    if (c.encoding == Encoding::NormOrL2) return "coalesce(norm, stat_l2)";
    return storedColumn(c);
  }
  throw std::logic_error("table " + std::string(table.name) + " has no column " +
                         std::string(column));
}

std::string collectTextsSql(const TableDef& table, const std::string& source,
                            const std::string& textsTable) {
  std::string select;
  for (const auto& c : table.columns) {
    if (c.encoding != Encoding::Text) continue;
    if (!select.empty()) select += " UNION ";
    select += "SELECT " + std::string(c.name) + " FROM " + source;
  }
  return "INSERT OR IGNORE INTO " + textsTable + "(text) " + select;
}

std::string copyPackedSql(const TableDef& table, const std::string& source, const std::string& into,
                          const std::string& textsTable, const std::string& shardId) {
  std::string cols, values;
  for (const auto& c : table.columns) {
    if (isKeyColumn(c)) continue;
    cols += ", " + storedColumn(c);
    values += ", " + encodeExpr(c, "src.", textsTable);
  }
  return "INSERT INTO " + into + "(shard_id" + cols + ") SELECT " + shardId + values + " FROM " +
         source + " AS src ORDER BY src.rowid";
}

void writeRunInfo(Db& db, const events::RunInfo& info) {
  const TableDef& def = tableDef("run");
  std::string marks;
  for (size_t k = 1; k < def.columns.size(); ++k) marks += ",?";
  Stmt run =
      db.prepare("INSERT OR REPLACE INTO run(id, " + dataColumns(def) + ") VALUES(1" + marks + ")");
  int i = 1;
  run.bindText(i++, info.runId);
  run.bindText(i++, info.configText);
  run.bindText(i++, info.configHash);
  run.bind(i++, info.worldSize);
  run.bind(i++, info.iterations);
  run.bind(i++, info.microbatches);
  run.bindText(i++, events::toString(info.level));
  run.bindText(i++, info.versionStagescope);
  run.bindText(i++, info.versionTorch);
  run.bindText(i++, info.versionSqlite);
  run.bindText(i++, info.compiler);
  run.bind(i++, info.startUnixMs);
  run.bind(i++, info.endUnixMs);
  run.bindText(i++, events::toString(info.status));
  run.bindText(i++, info.statusReason);
  run.bindText(i++, events::toString(info.checksumFunction));
  std::string list;
  appendList(list, info.recordFilter.iterations);
  run.bindText(i++, list);
  list.clear();
  for (size_t k = 0; k < info.recordFilter.modules.size(); ++k)
    list += (k ? "," : "") + info.recordFilter.modules[k];
  run.bindText(i++, list);
  list.clear();
  appendList(list, info.recordFilter.ranks);
  run.bindText(i++, list);
  run.run();

  db.exec("DELETE FROM modules");  // the run's modules are info's, no others (a captured job's
                                   // placeholder gives way to the layout it declares)
  Stmt mod = db.prepare(insertSql(tableDef("modules"), "INSERT OR REPLACE"));
  std::string downstream;
  for (const auto& m : info.modules) {
    downstream.clear();
    for (size_t k = 0; k < m.downstream.size(); ++k) downstream += (k ? "," : "") + m.downstream[k];
    int j = 1;
    mod.bindText(j++, m.name);
    mod.bindText(j++, m.kind);
    mod.bind(j++, m.tp);
    mod.bind(j++, m.cp);
    mod.bind(j++, m.pp);
    mod.bind(j++, m.dp);
    mod.bind(j++, m.offset);
    mod.bind(j++, m.layers);
    mod.bindText(j++, downstream);
    mod.run();
  }
  writeRunSettings(db, info.settings);
  writeRunOrigin(db, info);
}

void writeRunOrigin(Db& db, const events::RunInfo& info) {
  if (!db.hasTable("run_origin") || !db.hasTable("job_schedule")) return;  // an older file
  db.exec("DELETE FROM run_origin");
  db.exec("DELETE FROM job_schedule");
  Stmt origin = db.prepare("INSERT INTO run_origin(id, origin) VALUES(1, ?)");
  origin.bindText(1, events::toString(info.origin));
  origin.run();
  Stmt row = db.prepare(insertSql(tableDef("job_schedule")));
  for (const auto& j : info.jobSchedule) {
    int i = 1;
    row.bind(i++, j.rank);
    row.bindText(i++, j.module);
    row.bind(i++, j.stage);
    row.bind(i++, j.globalStage);
    row.bind(i++, j.totalStages);
    row.bind(i++, j.warmup);
    row.run();
  }
}

void writeRunSettings(Db& db, const events::RunSettings& s) {
  if (!db.hasTable("run_settings") || !db.hasTable("module_settings")) return;  // an older file
  db.exec("DELETE FROM run_settings");
  db.exec("DELETE FROM module_settings");
  if (!s.recorded) return;
  Stmt run = db.prepare("INSERT INTO run_settings(id, " + dataColumns(tableDef("run_settings")) +
                        ") VALUES(1,?,?,?,?,?,?,?,?,?,?,?,?)");
  int i = 1;
  run.bind(i++, static_cast<int64_t>(s.seed));
  run.bind(i++, s.microBatchSize);
  run.bindText(i++, events::toString(s.dtype));
  run.bind(i++, s.forwardOnly ? 1 : 0);
  bindReal(run, i++, s.lossScale);
  run.bindText(i++, events::toString(s.optimizer.kind));
  for (double v : {s.optimizer.lr, s.optimizer.momentum, s.optimizer.beta1, s.optimizer.beta2,
                   s.optimizer.eps, s.optimizer.weightDecay})
    bindReal(run, i++, v);
  run.run();
  Stmt mod = db.prepare(insertSql(tableDef("module_settings")));
  for (const auto& m : s.modules) {
    int j = 1;
    mod.bindText(j++, m.name);
    mod.bindText(j++, events::toString(m.kind));
    mod.bind(j++, m.dp);
    mod.bind(j++, m.patches);
    mod.bind(j++, m.patchDim);
    mod.bind(j++, m.textLen);
    mod.bind(j++, m.vocab);
    mod.run();
  }
}

namespace {

const char* typeName(std::filesystem::file_type t) {
  using T = std::filesystem::file_type;
  switch (t) {
    case T::directory:
      return "a directory";
    case T::fifo:
      return "a FIFO";
    case T::block:
    case T::character:
      return "a device";
    case T::socket:
      return "a socket";
    case T::symlink:
      return "a symbolic link";
    default:
      return "not a regular file";
  }
}

}  // namespace

void checkCompanions(const std::string& path) {
  using Kind = RunFileError::Kind;
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const char* suffix : {"-journal", "-wal", "-shm"}) {
    const std::string companion = path + suffix;
    const fs::file_status cs = fs::symlink_status(companion, ec);
    if (cs.type() == fs::file_type::not_found || cs.type() == fs::file_type::none) continue;
    if (cs.type() != fs::file_type::regular) {
      throw RunFileError(Kind::NotARunFile,
                         companion + ": is " + typeName(cs.type()) + ", not SQLite's " +
                             (suffix[1] == 'j'   ? "journal"
                              : suffix[1] == 'w' ? "WAL"
                                                 : "index") +
                             " of " + path + "; move it away to read the run file");
    }
  }
}

namespace {

// The file itself must be a regular file (links followed), and its companions regular files
// too (checkCompanions).
void checkFileAndCompanions(const std::string& path) {
  using Kind = RunFileError::Kind;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec == std::errc::too_many_symbolic_link_levels)
    throw RunFileError(Kind::NotARunFile, path + ": a loop of symbolic links, not a run file");
  if (st.type() == fs::file_type::not_found || (ec && st.type() == fs::file_type::none))
    throw RunFileError(Kind::NotFound, path + ": no such file" +
                                           (ec && ec != std::errc::no_such_file_or_directory
                                                ? " (" + ec.message() + ")"
                                                : std::string()));
  if (st.type() != fs::file_type::regular)
    throw RunFileError(Kind::NotARunFile,
                       path + ": is " + typeName(st.type()) + ", not a run file");
  if (::access(path.c_str(), R_OK) != 0)
    throw RunFileError(Kind::NotFound, path + ": cannot be read: " + std::strerror(errno));
  checkCompanions(path);
}

// The views and triggers stagescope writes (packedSchemaSql), name -> their SQL as SQLite keeps
// it in sqlite_master (without "IF NOT EXISTS" and the final ';').
const std::map<std::string, std::string>& ownViewsAndTriggers() {
  static const std::map<std::string, std::string> own = [] {
    std::map<std::string, std::string> out;
    for (const auto& t : allTables()) {
      if (!t.packed) continue;
      std::istringstream in(packedSchemaSql(t));
      for (std::string stmt; std::getline(in, stmt);) {
        for (const char* kind : {"CREATE VIEW IF NOT EXISTS ", "CREATE TRIGGER IF NOT EXISTS "}) {
          if (stmt.rfind(kind, 0) != 0) continue;
          const std::string head = std::string(kind).substr(0, std::string(kind).find(" IF "));
          std::string rest = stmt.substr(std::strlen(kind));
          if (!rest.empty() && rest.back() == ';') rest.pop_back();
          out[rest.substr(0, rest.find(' '))] = head + " " + rest;
        }
      }
    }
    return out;
  }();
  return own;
}

// Only stagescope's own schema: a view (data that is not stored) or a trigger (code that would
// run inside a writer such as `merge`) other than the ones stagescope writes, word for word,
// is refused.
void checkNoForeignSchema(Db& db, const std::string& path) {
  Stmt s =
      db.prepare("SELECT type, name, sql FROM sqlite_master WHERE type IN ('view', 'trigger')");
  while (s.step()) {
    const std::string name(s.text(1));
    const auto it = ownViewsAndTriggers().find(name);
    if (it != ownViewsAndTriggers().end() && it->second == s.text(2)) continue;
    throw RunFileError(RunFileError::Kind::Corrupt,
                       path + ": has a " + std::string(s.text(0)) + " '" + name +
                           "' that stagescope does not write (an edited file?); not used");
  }
}

}  // namespace

Db openStagescopeFile(const std::string& path, bool writable) {
  using Kind = RunFileError::Kind;
  checkFileAndCompanions(path);
  unsigned char header[100] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(header), sizeof header);
  const auto got = in.gcount();
  if (got == 0) throw RunFileError(Kind::NotARunFile, path + ": empty file, not a run file");
  if (got < 16 || std::memcmp(header, "SQLite format 3", 16) != 0)
    throw RunFileError(Kind::NotARunFile, path + ": not an SQLite database, so not a run file");
  if (got < 100) throw RunFileError(Kind::Corrupt, path + ": truncated SQLite header");
  checkNotTruncated(path, header);
  try {
    Db db(path, writable ? Db::Mode::ReadWrite : Db::Mode::ReadOnly);
    db.setBusyTimeout(10000);
    const int64_t app = db.queryInt("PRAGMA application_id");
    if (app != kApplicationId) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "0x%08x", static_cast<unsigned>(app));
      throw RunFileError(Kind::NotARunFile,
                         path + ": SQLite database with application_id " + hex +
                             ", not a stagescope run file (expected 0x53544753)");
    }
    const int64_t version = db.queryInt("PRAGMA user_version");
    if (version < kOldestReadableVersion)
      throw RunFileError(Kind::NotARunFile, path + ": format version " + std::to_string(version) +
                                                " is not a stagescope format (oldest readable: " +
                                                std::to_string(kOldestReadableVersion) + ")");
    if (version > kSchemaVersion)
      throw RunFileError(Kind::NewerVersion, path + ": format version " + std::to_string(version) +
                                                 " is newer than this build reads (" +
                                                 std::to_string(kSchemaVersion) +
                                                 "); upgrade stagescope");
    checkNoForeignSchema(db, path);
    return db;
  } catch (const SqliteError& e) {
    // A read-only reader cannot roll back the journal a dead writer left: the data is intact
    // and a writer (merge) rolls the interrupted transaction back when it opens the file.
    std::error_code ec;
    if (!writable && e.code() == SQLITE_READONLY &&
        std::filesystem::exists(path + "-journal", ec)) {
      throw RunFileError(Kind::Corrupt,
                         path + ": the writer died mid-transaction (hot journal " + path +
                             "-journal); `stagescope merge " + path +
                             "` recovers it (rolls the unfinished transaction back)");
    }
    if (e.code() == SQLITE_BUSY) {
      throw RunFileError(Kind::Busy, path +
                                         ": locked by another process for more than 10 s (an "
                                         "SQLite writer at work?); try again once it has finished");
    }
    throw RunFileError(Kind::Corrupt, std::string(e.what()) + " (corrupt or truncated file)");
  }
}

void bindReal(Stmt& s, int index, double value) {
  if (std::isnan(value))
    s.bindText(index, kNaNText);
  else
    s.bind(index, value);
}

bool readReal(const Stmt& s, int column, double* out) {
  switch (s.type(column)) {
    case SQLITE_NULL:
      return false;
    case SQLITE_TEXT:
      if (s.text(column) != kNaNText) return false;
      *out = std::numeric_limits<double>::quiet_NaN();
      return true;
    default:
      *out = s.f64(column);
      return true;
  }
}

void appendList(std::string& out, const std::vector<int64_t>& v) {
  appendListT(out, v);
}
void appendList(std::string& out, const std::vector<int32_t>& v) {
  appendListT(out, v);
}
bool parseList(std::string_view t, std::vector<int64_t>* out) {
  return parseListT(t, out);
}
bool parseList(std::string_view t, std::vector<int32_t>* out) {
  return parseListT(t, out);
}

bool parseSide(std::string_view t, events::Side* out) {
  return parseEnum(t, out, 2, [](events::Side e) { return events::toString(e); });
}
bool parseDirection(std::string_view t, events::Direction* out) {
  return parseEnum(t, out, 2, [](events::Direction e) { return events::toString(e); });
}
bool parseEdgeKind(std::string_view t, events::EdgeKind* out) {
  return parseEnum(t, out, 2, [](events::EdgeKind e) { return events::toString(e); });
}
bool parseBridgeRole(std::string_view t, events::BridgeRole* out) {
  return parseEnum(t, out, 4, [](events::BridgeRole e) { return events::toString(e); });
}
bool parseGradPhase(std::string_view t, events::GradPhase* out) {
  return parseEnum(t, out, 5, [](events::GradPhase e) { return events::toString(e); });
}
bool parseActionKindText(std::string_view t, events::ActionKind* out) {
  return parseEnum(t, out, static_cast<int>(events::ActionKind::Count),
                   [](events::ActionKind e) { return events::toString(e); });
}

}  // namespace stagescope::storage
