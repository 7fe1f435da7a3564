// The run-file schema (docs/run-file.md documents it table by table).
//
// One schema serves both file kinds: a rank shard (written by ShardWriter, one per rank) and
// the merged run file (written by Merge).  Shards additionally hold the one-row `writer`
// table; the run file additionally holds `shards`.  Event tables carry `shard_id` (NULL in a
// shard, shards.id in the run file) so that a re-merge can replace exactly one shard's rows.
//
// Enumerations are the short text of events::toString (e.g. kind 'SF_RB', side 'send');
// list-valued fields (shapes, peers) comma-separated decimal text "4,2,32".
//
// Packed tables (format 3, run file only).  The four big tables (plan, actions, transfers,
// gradients) are stored in the run file as `<name>_rows`, whose text columns hold an integer
// id into the dictionary `texts(id, text)` (column `<col>_id`), and whose gradient `norm` is
// NULL when it equals `stat_l2` (the usual case: both are the L2 norm).  A view `<name>` with
// INSTEAD OF triggers shows and accepts the logical columns, so SQL written against the
// logical tables keeps working.  Shards keep the logical tables (the writer binds text).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/events/Events.h"
#include "storage/RunFileError.h"
#include "storage/Sqlite.h"

namespace stagescope::storage {

// PRAGMA application_id of every stagescope file: 'STGS'.
constexpr int32_t kApplicationId = 0x53544753;
// PRAGMA user_version: the format version this build writes and the newest it reads.
// Rule (docs/run-file.md "Versioning"): it moves when a change would make an older reader
// misread a newer file (a removed, renamed or retyped column, a changed unit or encoding).
// Adding a table or a nullable column does not move it.
// Version 2: checksums are XXH3-64 (version 1: a non-standard FNV-1a, read as
// ChecksumFunction::LegacyFnv1a64); NaN in REAL columns is the text 'NaN' (version 1 stored
// NULL); the reference has its own tables (version 1: rank -1 rows in losses/gradients).
// Version 3: the run file packs plan, actions, transfers and gradients (see above).
constexpr int32_t kSchemaVersion = 3;
constexpr int32_t kOldestReadableVersion = 1;

// How a column of a packed table is stored in `<table>_rows` (logical value -> stored value).
enum class Encoding {
  Plain,     // as is
  Text,      // `<name>_id`: the id of the text in `texts`
  NormOrL2,  // NULL when bit-for-bit equal to stat_l2 (the view shows coalesce(norm, stat_l2))
};

struct ColumnDef {
  const char* name;
  const char* type;  // SQL type and constraints (of the logical column)
  Encoding encoding = Encoding::Plain;
};

struct TableDef {
  const char* name;
  std::vector<ColumnDef> columns;
  bool perShard;  // an event table with shard_id: merged by INSERT…SELECT, replaced on re-merge
  bool packed = false;  // run file: stored as `<name>_rows` behind the view `<name>`
};

// Every table of the format, in creation order (shard-only and run-only tables included).
const std::vector<TableDef>& allTables();
const TableDef& tableDef(std::string_view name);

// Names of the columns a writer fills, comma-separated, in declaration order, leaving out the
// INTEGER PRIMARY KEY `id` and `shard_id`.  INSERT statements bind in this order.
std::string dataColumns(const TableDef& table);
// "INSERT INTO <table>(<dataColumns>) VALUES(?,?,…)", with `rows` parenthesised groups of
// parameters (one row each, in order: row r's column c is parameter r * dataColumnCount + c + 1).
std::string insertSql(const TableDef& table, const char* verb = "INSERT", int rows = 1);
// How many columns dataColumns names (the parameters of one row of insertSql).
int dataColumnCount(const TableDef& table);

enum class FileKind { Shard, Run };
// Creates tables (IF NOT EXISTS), sets application_id and user_version.  No indexes.  A run
// file gets the packed tables, `texts`, and the logical views with their triggers.
void createSchema(Db& db, FileKind kind);
// Creates the read indexes of the run file (after the bulk load; idempotent).
void createIndexes(Db& db);

// ---- packed tables (run file, format >= 3) -----------------------------------------------
// The stored table of `table` in a run file: "<name>_rows" when packed, else the name.
std::string storedTable(const TableDef& table);
// The stored column of a logical column ("<name>_id" for Encoding::Text).
std::string storedColumn(const ColumnDef& column);
// SQL expression reading logical column `column` from the stored table (aliased or not):
// text columns yield the id (the reader decodes it), `norm` yields coalesce(norm, stat_l2).
std::string storedReadExpr(const TableDef& table, std::string_view column);
// One statement adding every text of `source`'s Text columns (a logical table, e.g.
// "s0.transfers") to `textsTable` (e.g. "main.texts").
std::string collectTextsSql(const TableDef& table, const std::string& source,
                            const std::string& textsTable);
// "INSERT INTO <into>(shard_id, stored columns) SELECT <shardId>, encoded columns FROM <source>
// ORDER BY rowid": copies a logical table (a shard's) into the stored table `into`, looking
// text up in `textsTable` (already holding every text: collectTextsSql).
std::string copyPackedSql(const TableDef& table, const std::string& source, const std::string& into,
                          const std::string& textsTable, const std::string& shardId);

// Writes RunInfo into the `run` row (id 1) and the `modules` rows (exactly info.modules: other
// rows are deleted).  Call it inside a transaction, so readers see both change together.
void writeRunInfo(Db& db, const events::RunInfo& info);
// Writes the `run_settings` row and the `module_settings` rows (none when !settings.recorded);
// nothing in a file older than these tables.  Part of writeRunInfo.
void writeRunSettings(Db& db, const events::RunSettings& settings);
// Writes the `run_origin` row and the `job_schedule` rows (exactly info.jobSchedule); nothing in
// a file older than these tables.  Part of writeRunInfo.
void writeRunOrigin(Db& db, const events::RunInfo& info);

// Opens an existing stagescope file and checks its format; throws RunFileError (NotFound,
// NotARunFile, NewerVersion, Corrupt) naming the file and the reason.
// Fails (RunFileError) when SQLite's companions of `path` - "-journal", "-wal", "-shm" - exist
// but are not regular files: SQLite would block forever opening a FIFO named like its journal,
// or write through a link named like it.
void checkCompanions(const std::string& path);
Db openStagescopeFile(const std::string& path, bool writable);

// Non-finite REAL values (docs/run-file.md "Non-finite values").  SQLite stores ±Inf as REAL
// but turns a bound NaN into NULL, so a NaN is stored as the TEXT 'NaN'; NULL keeps meaning
// "not recorded".  Every REAL column that can hold a measured value is written by bindReal
// and read by readReal.
constexpr const char* kNaNText = "NaN";
void bindReal(Stmt& s, int index, double value);
// False when the column is NULL (not recorded) or holds text other than 'NaN'.
bool readReal(const Stmt& s, int column, double* out);

// Text encodings of list-valued fields.
void appendList(std::string& out, const std::vector<int64_t>& values);
void appendList(std::string& out, const std::vector<int32_t>& values);
// Parses "4,2,32"; returns false on malformed text.
bool parseList(std::string_view text, std::vector<int64_t>* out);
bool parseList(std::string_view text, std::vector<int32_t>* out);

// Text encodings of enumerations not parsed by core/events.
bool parseSide(std::string_view t, events::Side* out);
bool parseDirection(std::string_view t, events::Direction* out);
bool parseEdgeKind(std::string_view t, events::EdgeKind* out);
bool parseBridgeRole(std::string_view t, events::BridgeRole* out);
bool parseGradPhase(std::string_view t, events::GradPhase* out);
bool parseActionKindText(std::string_view t, events::ActionKind* out);

}  // namespace stagescope::storage
