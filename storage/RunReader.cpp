#include "storage/RunReader.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "core/events/CapturedLayout.h"
#include "core/events/FaultPhrase.h"
#include "core/events/Limits.h"
#include "core/model/EdgeRanks.h"
#include "core/model/Pairing.h"
#include "storage/Merge.h"
#include "storage/Schema.h"
#include "storage/Sqlite.h"

namespace stagescope::storage {
namespace {

using Kind = RunFileError::Kind;
namespace lim = events::limits;
// Bounds of values read from a file (core/events/Limits.h): a config cannot ask for more, so a
// file that claims more is corrupt.  Checked before a value sizes or indexes anything.
constexpr int64_t kMaxRanks = lim::kMaxWorldSize;
constexpr int64_t kLastRank = lim::kMaxWorldSize - 1;
constexpr int64_t kLastIteration = lim::kMaxIterations - 1;
constexpr int64_t kLastMicrobatch = lim::kMaxMicrobatches - 1;
constexpr int64_t kInt32Max = INT32_MAX;

// Reads tables of one file into a RunModel; every failure becomes a RunFileError.
class Loader {
 public:
  Loader(Db& db, model::RunModel& m, const LoadOptions& opts, std::function<void(float)>& progress)
      : db_(db), m_(m), opts_(opts), progress_(progress) {}
  // The side threads use this Loader's dictionary and model: they stop before any member goes
  // (an error unwinding through load() leaves them running).
  ~Loader() {
    if (transfers_) transfers_->stop();
    if (second_) second_->stop();
  }
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  void load() {
    readTexts();
    countRows();
    readRun();
    readSettings();
    readOrigin();
    const bool values = !opts_.timelineOnly && !opts_.statusOnly;  // gradients, losses, ...
    const bool timeline = !opts_.detailsOnly;
    const bool messages = timeline && !opts_.statusOnly;  // transfers, collectives, waits
    if (messages) startTransferReader();
    if (values) startSecondReader();  // after: it balances against the transfers' thread
    if (timeline) {
      readModules();
      readRanks();
    }
    if (!opts_.timelineOnly) readActions("plan", false);
    if (timeline) readActions("actions", true);
    if (messages) readTransfers();
    if (values) {
      readGradients();
      readLosses();
      readInputs();
    }
    if (timeline) readDiagnoses();
    if (timeline) readInjectedFaults();
    if (messages) readCollectives();
    if (messages) readMessageRoles();
    if (values) readModuleSteps();
    if (messages) readBatchMembers();
    if (m_.schemaVersion >= 2) {
      if (values) {
        readReferenceLosses();
        readReferenceGradients();
      }
      if (messages) readWaits();
    }
    if (timeline) readShards();
  }

 private:
  [[noreturn]] void bad(const char* table, const std::string& what) {
    throw RunFileError(Kind::Corrupt, m_.path + ": table " + table + ": " + what);
  }
  template <typename E, typename Parse>
  E parse(const char* table, std::string_view text, Parse fn) {
    E e{};
    if (!fn(text, &e)) bad(table, "unknown value '" + std::string(text) + "'");
    return e;
  }
  template <typename T>
  void list(const char* table, std::string_view text, std::vector<T>* out) {
    if (!parseList(text, out)) bad(table, "malformed list '" + std::string(text) + "'");
  }
  // A column that counts, sizes or indexes something: read in 64 bits and checked against
  // [lo, hi] (hi <= INT32_MAX) before it is used.
  // Only an INTEGER (or NULL, read as 0, where `nullable`): SQLite would quietly read text,
  // a blob or a real as some number.
  int32_t bounded(const Stmt& s, int c, const char* table, const char* column, int64_t lo,
                  int64_t hi, bool nullable = true) {
    integer(s, c, table, column, nullable);
    const int64_t v = s.i64(c);
    if (v < lo || v > hi) {
      bad(table, std::string(column) + " = " + std::to_string(v) + ", expected " +
                     std::to_string(lo) + ".." + std::to_string(hi));
    }
    return static_cast<int32_t>(v);
  }
  // Fails unless column c holds an INTEGER (or NULL where `nullable`).
  void integer(const Stmt& s, int c, const char* table, const char* column, bool nullable) {
    const int type = s.type(c);
    if (type == SQLITE_INTEGER || (type == SQLITE_NULL && nullable)) return;
    const char* what = type == SQLITE_NULL    ? "NULL"
                       : type == SQLITE_FLOAT ? "a real number"
                       : type == SQLITE_TEXT  ? "text"
                                              : "a blob";
    bad(table, std::string(column) + " holds " + what + ", expected an integer");
  }
  // A size in bytes: an INTEGER in 0..2^36 elements of 8 bytes.
  int64_t byteCount(const Stmt& s, int c, const char* table, const char* column) {
    integer(s, c, table, column, true);
    const int64_t v = s.i64(c);
    if (v < 0 || v > lim::kMaxElements * 8) {
      bad(table, std::string(column) + " = " + std::to_string(v) + ", expected 0.." +
                     std::to_string(lim::kMaxElements * 8));
    }
    return v;
  }
  // A tensor shape: every extent >= 0 and at most kMaxElements elements in all.
  void shape(const char* table, const char* column, std::string_view text,
             std::vector<int64_t>* out) {
    list(table, text, out);
    int64_t elements = 1;
    for (int64_t d : *out) {
      if (d < 0 || (d > 0 && elements > lim::kMaxElements / d)) {
        bad(table, std::string(column) + " '" + std::string(text) +
                       "' is not a shape of at most 2^36 elements");
      }
      elements *= d;
    }
  }
  static void assign(std::string& dst, std::string_view v) { dst.assign(v.data(), v.size()); }
  bool v1() const { return m_.schemaVersion < 2; }
  // A measured REAL (docs/run-file.md "Non-finite values"): false when NULL.  Format 1 bound
  // NaN as NULL, so there a NULL where a value was always written (`nullIsNaN`) reads as NaN.
  bool real(const char* table, const Stmt& s, int c, double* out, bool nullIsNaN = false) {
    if (s.isNull(c)) {
      if (!(nullIsNaN && v1())) return false;
      *out = std::numeric_limits<double>::quiet_NaN();
      return true;
    }
    if (!readReal(s, c, out))
      bad(table, "REAL column " + std::to_string(c) + " holds text '" + std::string(s.text(c)) +
                     "' (expected a number or 'NaN')");
    return true;
  }

  // Rows of the big tables (for progress, and to size the vectors once: growing a vector of
  // millions of records by doubling would hold the old and the new copy at once).
  void countRows() {
    for (const char* t : {"plan", "actions", "transfers", "gradients", "losses"}) {
      const bool timelineTable =
          std::string_view(t) == "actions" || std::string_view(t) == "transfers";
      if ((opts_.timelineOnly && !timelineTable) || (opts_.detailsOnly && timelineTable)) continue;
      if (opts_.statusOnly && std::string_view(t) != "actions" && std::string_view(t) != "plan")
        continue;
      const int64_t n = db_.queryInt("SELECT count(*) FROM " + stored(t));
      rows_[t] = n;
      total_ += n;
    }
  }
  // Capacity to reserve for `table`: the rows it holds (capped at 2^30; past that the vector
  // grows as it reads).
  size_t reserveFor(const char* table) const {
    auto it = rows_.find(table);
    return it == rows_.end() ? 0 : static_cast<size_t>(std::clamp<int64_t>(it->second, 0, 1 << 30));
  }

  // ---- packed tables (format 3 run files; docs/run-file.md "Packed tables") ----
  // The dictionary `texts`, when the file has one: ids index texts_ directly.
  static constexpr int64_t kMaxTextId = int64_t{1} << 24;
  void readTexts() {
    packed_ = db_.hasTable("texts");
    if (!packed_) return;
    Stmt s = db_.prepare("SELECT id, text FROM texts ORDER BY id");
    while (s.step()) {
      const int64_t id = s.i64(0);
      if (id < 0 || id > kMaxTextId)
        bad("texts", "id " + std::to_string(id) + ", expected 0.." + std::to_string(kMaxTextId));
      if (texts_.size() <= static_cast<size_t>(id)) {
        texts_.resize(static_cast<size_t>(id) + 1);
        known_.resize(static_cast<size_t>(id) + 1);
      }
      assign(texts_[static_cast<size_t>(id)], s.text(1));
      known_[static_cast<size_t>(id)] = true;
    }
  }
  // The table to read logical table `name` from.
  std::string stored(const char* name) const {
    return packed_ ? storedTable(tableDef(name)) : std::string(name);
  }
  // SELECT list of logical columns of `name` as stored (packed text columns: their ids).
  std::string columns(const char* name, std::initializer_list<const char*> cols) const {
    std::string out;
    for (const char* c : cols) {
      if (!out.empty()) out += ", ";
      out += packed_ ? storedReadExpr(tableDef(name), c) : std::string(c);
    }
    return out;
  }
  // A text column of a logical table: the text itself, or in a packed table its id's text
  // (NULL reads as "" either way).
  std::string_view txt(const char* table, const Stmt& s, int c) {
    if (!packed_) return s.text(c);
    if (s.isNull(c)) return {};
    const int64_t id = s.i64(c);
    if (id < 0 || static_cast<size_t>(id) >= texts_.size() || !known_[static_cast<size_t>(id)])
      bad(table, "text id " + std::to_string(id) + " (column " + std::to_string(c) +
                     ") is not in table texts");
    return texts_[static_cast<size_t>(id)];
  }
  // A text column's parsed value, parsed once per dictionary id: a packed file repeats a
  // handful of texts (kinds, sides, shapes, peer lists) millions of times.  `parseText` turns
  // the text into T or throws RunFileError; only a value that parsed is remembered, so a bad
  // text fails on every row that has it, as without the memo.  Unpacked files parse each row.
  template <typename T>
  struct Memo {
    std::vector<T> value;      // by text id
    std::vector<uint8_t> has;  // by text id: value[id] is parsed
    T scratch{};               // unpacked files and NULLs
  };
  template <typename T, typename ParseText>
  const T& memoized(Memo<T>& memo, const char* table, const Stmt& s, int c, ParseText parseText) {
    if (!packed_ || s.isNull(c)) {
      memo.scratch = parseText(txt(table, s, c));
      return memo.scratch;
    }
    const int64_t id = s.i64(c);
    if (id >= 0 && static_cast<size_t>(id) < memo.has.size() && memo.has[static_cast<size_t>(id)])
      return memo.value[static_cast<size_t>(id)];
    T v = parseText(txt(table, s, c));  // txt: the id is in `texts` (else it throws)
    const auto i = static_cast<size_t>(id);
    if (memo.has.size() <= i) {
      memo.has.resize(i + 1, 0);
      memo.value.resize(i + 1);
    }
    memo.value[i] = std::move(v);
    memo.has[i] = 1;
    return memo.value[i];
  }
  // Parsers for memoized(): each throws RunFileError naming `table` on a bad text.
  template <typename E, typename Parse>
  auto enumOf(const char* table, Parse fn) {
    return [this, table, fn](std::string_view t) { return parse<E>(table, t, fn); };
  }
  auto shapeOf(const char* table, const char* column) {
    return [this, table, column](std::string_view t) {
      std::vector<int64_t> v;
      shape(table, column, t, &v);
      return events::Shape(v);
    };
  }
  // A text column as an interned name: interned once per dictionary id of a packed file.
  const events::Name& name(Memo<events::Name>& memo, const char* table, const Stmt& s, int c) {
    return memoized(memo, table, s, c, [](std::string_view t) { return events::Name(t); });
  }

  void tick() {
    if (!progress_ || (++done_ & 0xffff) != 0 || total_ <= 0) return;
    int64_t done = done_;
    for (const SideRead* side : {static_cast<const SideRead*>(second_.get()),
                                 static_cast<const SideRead*>(transfers_.get())})
      if (side) done += side->rowsDone.load(std::memory_order_relaxed);
    progress_(std::min(0.99f, static_cast<float>(done) / static_cast<float>(total_)));
  }

  void readRun() {
    // Format 1 has the first 15 columns only.
    const std::string cols = v1() ? "run_id, config_text, config_hash, world_size, iterations, "
                                    "microbatches, level, version_stagescope, version_torch, "
                                    "version_sqlite, compiler, start_unix_ms, end_unix_ms, "
                                    "status, status_reason"
                                  : dataColumns(tableDef("run"));
    Stmt s = db_.prepare("SELECT " + cols + " FROM run WHERE id = 1");
    m_.info.checksumFunction =
        v1() ? events::ChecksumFunction::LegacyFnv1a64 : events::ChecksumFunction::Xxh3_64;
    if (!s.step()) return;  // a shard of a rank other than 0
    auto& r = m_.info;
    assign(r.runId, s.text(0));
    assign(r.configText, s.text(1));
    assign(r.configHash, s.text(2));
    r.worldSize = bounded(s, 3, "run", "world_size", 0, lim::kMaxWorldSize, false);
    r.iterations = bounded(s, 4, "run", "iterations", 0, lim::kMaxIterations, false);
    r.microbatches = bounded(s, 5, "run", "microbatches", 0, lim::kMaxMicrobatches, false);
    r.level = parse<events::RecordLevel>("run", s.text(6), [](std::string_view t, auto* o) {
      return events::parseRecordLevel(std::string(t), o);
    });
    assign(r.versionStagescope, s.text(7));
    assign(r.versionTorch, s.text(8));
    assign(r.versionSqlite, s.text(9));
    assign(r.compiler, s.text(10));
    r.startUnixMs = s.i64(11);
    r.endUnixMs = s.i64(12);
    r.status = parse<events::RunStatus>("run", s.text(13), [](std::string_view t, auto* o) {
      return events::parseRunStatus(std::string(t), o);
    });
    assign(r.statusReason, s.text(14));
    if (v1()) return;
    r.checksumFunction = parse<events::ChecksumFunction>(
        "run", s.text(15),
        [](std::string_view t, auto* o) { return events::parseChecksumFunction(t, o); });
    list("run", s.text(16), &r.recordFilter.iterations);
    std::string_view mods = s.text(17);
    while (!mods.empty()) {
      size_t comma = mods.find(',');
      r.recordFilter.modules.emplace_back(mods.substr(0, comma));
      mods = comma == std::string_view::npos ? std::string_view() : mods.substr(comma + 1);
    }
    list("run", s.text(18), &r.recordFilter.ranks);
  }

  // The resolved settings (events::RunSettings), when the file records them: a file without
  // the tables (recorded before they existed), or with no row (a captured job, a shard), leaves
  // settings.recorded false.
  void readSettings() {
    if (!db_.hasTable("run_settings") || !db_.hasTable("module_settings")) return;
    Stmt s = db_.prepare("SELECT " + dataColumns(tableDef("run_settings")) +
                         " FROM run_settings WHERE id = 1");
    if (!s.step()) return;
    events::RunSettings& r = m_.info.settings;
    const char* t = "run_settings";
    integer(s, 0, t, "seed", false);
    if (s.i64(0) < 0) bad(t, "seed = " + std::to_string(s.i64(0)) + ", expected >= 0");
    r.seed = static_cast<uint64_t>(s.i64(0));
    r.microBatchSize = bounded(s, 1, t, "micro_batch_size", 1, kInt32Max, false);
    r.dtype = parse<events::Dtype>(t, s.text(2), [](std::string_view x, auto* o) {
      return events::parseDtype(std::string(x), o);
    });
    r.forwardOnly = bounded(s, 3, t, "forward_only", 0, 1, false) == 1;
    const char* reals[] = {
        "loss_scale",      "optimizer_lr",  "optimizer_momentum",    "optimizer_beta1",
        "optimizer_beta2", "optimizer_eps", "optimizer_weight_decay"};
    double* into[] = {
        &r.lossScale,       &r.optimizer.lr,  &r.optimizer.momentum,   &r.optimizer.beta1,
        &r.optimizer.beta2, &r.optimizer.eps, &r.optimizer.weightDecay};
    for (int k = 0; k < 7; ++k) {
      const int c = k == 0 ? 4 : 5 + k;
      if (!real(t, s, c, into[k]) || !std::isfinite(*into[k]))
        bad(t, std::string(reals[k]) + " is not a finite number");
    }
    r.optimizer.kind = parse<events::OptimizerKind>(t, s.text(5), [](std::string_view x, auto* o) {
      return events::parseOptimizerKind(std::string(x), o);
    });
    const char* mt = "module_settings";
    Stmt m =
        db_.prepare("SELECT " + dataColumns(tableDef(mt)) + " FROM module_settings ORDER BY rowid");
    while (m.step()) {
      events::ModuleSettings ms;
      assign(ms.name, m.text(0));
      ms.kind = parse<events::ModuleKind>(mt, m.text(1), [](std::string_view x, auto* o) {
        return events::parseModuleKind(std::string(x), o);
      });
      ms.dp = bounded(m, 2, mt, "dp", 1, kMaxRanks, false);
      ms.patches = bounded(m, 3, mt, "patches", 0, kInt32Max, false);
      ms.patchDim = bounded(m, 4, mt, "patch_dim", 0, kInt32Max, false);
      ms.textLen = bounded(m, 5, mt, "text_len", 0, kInt32Max, false);
      ms.vocab = bounded(m, 6, mt, "vocab", 0, kInt32Max, false);
      r.modules.push_back(std::move(ms));
    }
    r.recorded = true;
  }

  // What produced the file, and a captured job's declared schedule (tables run_origin,
  // job_schedule).  A file without a run_origin row (written before the tables existed) says
  // both in its config text (events/CapturedLayout.h): its first line names a captured job and
  // its "# job schedule:" lines hold the schedule (read in rank order, as the table is).  The one
  // place that reads them there.
  void readOrigin() {
    events::RunInfo& info = m_.info;
    std::optional<Stmt> origin;
    if (db_.hasTable("run_origin") && db_.hasTable("job_schedule"))
      origin.emplace(db_.prepare("SELECT origin FROM run_origin WHERE id = 1"));
    if (!origin || !origin->step()) {
      if (!events::beginsWithCapturedLine(info.configText)) return;
      info.origin = events::RunOrigin::Captured;
      info.jobSchedule = events::parseJobSchedule(info.configText);
      std::stable_sort(info.jobSchedule.begin(), info.jobSchedule.end(),
                       [](const auto& a, const auto& b) { return a.rank < b.rank; });
      return;
    }
    const char* t = "run_origin";
    info.origin = parse<events::RunOrigin>(t, origin->text(0), [](std::string_view x, auto* o) {
      return events::parseRunOrigin(std::string(x), o);
    });
    t = "job_schedule";
    Stmt s = db_.prepare("SELECT " + dataColumns(tableDef(t)) +
                         " FROM job_schedule ORDER BY rank, rowid");
    while (s.step()) {
      events::JobStage j;
      j.rank = bounded(s, 0, t, "rank", 0, kLastRank, false);
      assign(j.module, s.text(1));
      j.stage = bounded(s, 2, t, "stage", -1, kMaxRanks, false);
      j.globalStage = bounded(s, 3, t, "global_stage", -1, kMaxRanks, false);
      j.totalStages = bounded(s, 4, t, "total_stages", -1, kMaxRanks, false);
      j.warmup = bounded(s, 5, t, "warmup", -1, kInt32Max, false);
      info.jobSchedule.push_back(std::move(j));
    }
  }

  void readModules() {
    Stmt s = db_.prepare("SELECT " + dataColumns(tableDef("modules")) +
                         " FROM modules ORDER BY rank_offset, name");
    while (s.step()) {
      events::ModuleInfo mi;
      assign(mi.name, s.text(0));
      assign(mi.kind, s.text(1));
      mi.tp = bounded(s, 2, "modules", "tp", 1, kMaxRanks);
      mi.cp = bounded(s, 3, "modules", "cp", 1, kMaxRanks);
      mi.pp = bounded(s, 4, "modules", "pp", 1, kMaxRanks);
      mi.dp = bounded(s, 5, "modules", "dp", 1, kMaxRanks);
      mi.offset = bounded(s, 6, "modules", "rank_offset", 0, kLastRank);
      mi.layers = bounded(s, 7, "modules", "layers", 0, kInt32Max);
      std::string_view down = s.text(8);
      while (!down.empty()) {
        size_t comma = down.find(',');
        mi.downstream.emplace_back(down.substr(0, comma));
        down = comma == std::string_view::npos ? std::string_view() : down.substr(comma + 1);
      }
      m_.info.modules.push_back(std::move(mi));
    }
  }

  void readRanks() {
    Stmt s = db_.prepare(
        "SELECT rank, module, tp, cp, pp, dp, global_stage, total_stages, warmup, host, device, "
        "pid, clock_offset_ns, " +
        std::string(v1() ? "NULL" : "clock_offset_uncertainty_ns") + " FROM ranks ORDER BY rowid");
    while (s.step()) {
      events::RankInfo r;
      r.rank = bounded(s, 0, "ranks", "rank", 0, kLastRank);
      assign(r.module, s.text(1));
      r.tp = bounded(s, 2, "ranks", "tp", 0, kLastRank);
      r.cp = bounded(s, 3, "ranks", "cp", 0, kLastRank);
      r.pp = bounded(s, 4, "ranks", "pp", 0, kLastRank);
      r.dp = bounded(s, 5, "ranks", "dp", 0, kLastRank);
      r.globalStage = bounded(s, 6, "ranks", "global_stage", 0, kLastRank);
      r.totalStages = bounded(s, 7, "ranks", "total_stages", 0, kMaxRanks);
      r.warmup = bounded(s, 8, "ranks", "warmup", 0, lim::kMaxMicrobatches);
      assign(r.host, s.text(9));
      assign(r.device, s.text(10));
      r.pid = s.i64(11);
      r.clockOffsetNs = s.i64(12);
      r.clockOffsetUncertaintyNs = s.isNull(13) ? -1 : s.i64(13);
      m_.ranks.push_back(std::move(r));
    }
    // One row per (rank, module): a colocated rank holds several modules.
    model::sortRankRows(m_.ranks, m_.info.modules);
  }

  std::vector<events::ActionRecord>& rankList(std::vector<std::vector<events::ActionRecord>>& v,
                                              const char* table, int rank) {
    if (rank < 0 || rank > kLastRank) bad(table, "rank " + std::to_string(rank));
    if (static_cast<size_t>(rank) >= v.size()) v.resize(static_cast<size_t>(rank) + 1);
    return v[static_cast<size_t>(rank)];
  }

  // Rows of `table` ("plan", "actions") per rank as the merge counted them (shards.n_plan,
  // n_actions), so each rank's list is reserved once instead of doubling as it reads (at 10^7
  // actions the doubling left ~1/4 of the lists' memory unused on average, and each step
  // briefly held both copies).  A hint, not trusted: the reservations never add up to more
  // rows than the table holds, and a missing column or a NULL count reserves nothing.
  std::vector<size_t> rowsPerRank(const char* table) {
    std::vector<size_t> out(static_cast<size_t>(std::max(0, m_.info.worldSize)), 0);
    const std::string column = std::string("n_") + table;
    if (!db_.hasTable("shards") ||
        db_.queryInt("SELECT count(*) FROM pragma_table_info('shards') WHERE name = '" + column +
                     "'") == 0)
      return out;
    size_t left = reserveFor(table);
    Stmt s = db_.prepare("SELECT rank, " + column + " FROM shards WHERE state = 'merged'");
    while (s.step()) {
      if (s.isNull(0) || s.isNull(1)) continue;
      const int64_t rank = s.i64(0), n = s.i64(1);
      if (rank < 0 || rank >= static_cast<int64_t>(out.size()) || n <= 0) continue;
      const size_t take = std::min(static_cast<size_t>(n), left);
      out[static_cast<size_t>(rank)] += take;
      left -= take;
    }
    return out;
  }

  void readActions(const char* table, bool withTimes) {
    auto& out = withTimes ? m_.actions : m_.plan;
    out.resize(std::max<size_t>(out.size(), static_cast<size_t>(m_.info.worldSize)));  // bounded
    const std::vector<size_t> hint = rowsPerRank(table);
    for (size_t r = 0; r < hint.size(); ++r) out[r].reserve(hint[r]);
    std::string cols = columns(
        table, {"rank", "iteration", "seq", "kind", "microbatch", "module", "stage", "peers"});
    if (withTimes) cols += ", start_ns, end_ns";
    Stmt s = db_.prepare("SELECT " + cols + " FROM " + stored(table) + " ORDER BY rowid");
    Memo<events::ActionKind> kinds;
    Memo<events::Name> names;
    Memo<events::RankList> peers;
    while (s.step()) {
      events::ActionRecord a;
      a.rank = bounded(s, 0, table, "rank", 0, kLastRank);
      a.iteration = bounded(s, 1, table, "iteration", 0, kLastIteration);
      a.seq = bounded(s, 2, table, "seq", 0, kInt32Max);
      a.kind = memoized(kinds, table, s, 3, enumOf<events::ActionKind>(table, parseActionKindText));
      a.microbatch = bounded(s, 4, table, "microbatch", -1, kLastMicrobatch);
      a.module = name(names, table, s, 5);
      a.stage = bounded(s, 6, table, "stage", -1, kLastRank);
      a.peers = memoized(peers, table, s, 7, [&](std::string_view t) {
        std::vector<int32_t> v;
        list(table, t, &v);
        for (int peer : v) {
          if (peer < 0 || peer > kLastRank) bad(table, "peer rank " + std::to_string(peer));
        }
        return events::RankList(v);
      });
      if (withTimes) {
        a.startNs = s.i64(8);
        a.endNs = s.i64(9);
      }
      rankList(out, table, a.rank).push_back(std::move(a));
      tick();
    }
  }

  void readStats(const char* table, const Stmt& s, int c, bool* has, events::TensorStats* st) {
    *has = !s.isNull(c + 6);
    if (!*has) return;
    real(table, s, c, &st->min, true);
    real(table, s, c + 1, &st->max, true);
    real(table, s, c + 2, &st->mean, true);
    real(table, s, c + 3, &st->l2, true);
    st->nanCount = s.i64(c + 4);
    st->infCount = s.i64(c + 5);
    st->numel = s.i64(c + 6);
  }
  static void readPayload(const Stmt& s, int c, std::vector<uint8_t>* out) {
    auto b = s.blob(c);
    out->assign(b.begin(), b.end());
  }
  static void readPayload(const Stmt& s, int c, events::Bytes* out) {
    std::vector<uint8_t> bytes;
    readPayload(s, c, &bytes);
    *out = std::move(bytes);
  }

  // Bytes of one element of `dtype` as the recorders name dtypes (engine::dtypeName); 0 for a
  // name this reader does not know, whose payloads it cannot measure.
  static int64_t elementBytes(std::string_view dtype) {
    if (dtype == "float64" || dtype == "int64") return 8;
    if (dtype == "float32" || dtype == "int32") return 4;
    if (dtype == "bfloat16" || dtype == "float16" || dtype == "int16") return 2;
    if (dtype == "uint8" || dtype == "int8" || dtype == "bool") return 1;
    return 0;
  }
  static std::string gradientRow(const events::GradientRecord& g) {
    return "param " + std::string(std::string_view(g.param)) + " rank " + std::to_string(g.rank) +
           " iteration " + std::to_string(g.iteration) + " microbatch " +
           std::to_string(g.microbatch);
  }
  // A payload (level full) is the tensor's raw bytes (docs/run-file.md "Checksums"): exactly
  // numel(shape) x the element size of `dtype`.  One of another length is a damaged file: the
  // analyses would decode other values than were recorded, or none and judge the record by its
  // checksum alone (compare called such a run IDENTICAL).  `row` names the record.
  template <typename Dims>
  void payloadLength(const char* table, const std::string& row, size_t got, const Dims& shape,
                     std::string_view dtype) {
    const int64_t element = elementBytes(dtype);
    if (got == 0 || element == 0) return;  // no payload, or a dtype it cannot measure
    int64_t want = element;
    std::string dims;
    for (int64_t d : shape) {
      dims += (dims.empty() ? "" : ",") + std::to_string(d);
      want = d < 0 || (d > 0 && want > std::numeric_limits<int64_t>::max() / d) ? -1 : want * d;
      if (want < 0) break;
    }
    if (want == static_cast<int64_t>(got)) return;
    bad(table, row + ": payload of " + std::to_string(got) + " bytes, expected " +
                   (want < 0 ? std::string("a shape of fewer elements") : std::to_string(want)) +
                   " (shape [" + dims + "] " + std::string(dtype) + ")");
  }

  // The transfers: read here alone, or in chunks with the side thread (startTransferReader):
  // this thread takes the chunks the side thread has not, then the chunks' errors are
  // reported in file order, the first one as a serial read reports it.
  void readTransfers() {
    if (!transfers_) {
      m_.transfers.reserve(reserveFor("transfers"));
      m_.transferIds.reserve(reserveFor("transfers"));
      readTransferRows(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                       [this](int64_t id, events::TransferRecord&& t) {
                         m_.transferIds.push_back(id);
                         m_.transfers.push_back(std::move(t));
                         tick();
                       });
      return;
    }
    TransferReader& r = *transfers_;
    int64_t rows = 0;
    takeTransferChunks(r, [&] {
      ++rows;
      tick();
    });
    r.finish();  // the side thread's own failure (its connection, a changed file) first
    // Every chunk before the first failed one was taken and read whole (a thread stops only
    // at its own failure, and no chunk after a failed one is taken).
    for (const auto& c : r.chunks) {
      if (c.error) std::rethrow_exception(c.error);
      if (c.read != c.rows) chunkMiscounted(c);
    }
    m_.transfers = std::move(r.transfers);
    m_.transferIds = std::move(r.transferIds);
    done_ += static_cast<int64_t>(m_.transfers.size()) - rows;  // the side thread's rows
    transfers_.reset();
  }

  // The statement reading `cols` of `table`'s rows with rowid in [from, to] that `where` keeps
  // (empty: every row), in file order, then their payload (NULL unless LoadOptions::payloads):
  // the one query of the chunked readers (readTransferRows, readGradientRows).
  Stmt rowRange(const char* table, std::initializer_list<const char*> cols, int64_t from,
                int64_t to, const std::string& where = "") {
    Stmt s = db_.prepare("SELECT " + columns(table, cols) + ", " +
                         (opts_.payloads ? "payload" : "NULL") + " FROM " + stored(table) +
                         " WHERE rowid BETWEEN ?1 AND ?2" + (where.empty() ? "" : " AND " + where) +
                         " ORDER BY rowid");
    s.bind(1, from);
    s.bind(2, to);
    return s;
  }

  // Reads the transfer rows with rowid in [from, to] in file order; each goes to
  // `put(rowid, record)`.
  template <typename Put>
  void readTransferRows(int64_t from, int64_t to, Put put) {
    Stmt s =
        rowRange("transfers", {"id",         "rank",           "side",           "src_rank",
                               "dst_rank",   "src_group_rank", "dst_group_rank", "edge",
                               "edge_kind",  "role",           "direction",      "iteration",
                               "microbatch", "action_seq",     "shape",          "dtype",
                               "bytes",      "checksum",       "stat_min",       "stat_max",
                               "stat_mean",  "stat_l2",        "stat_nan_count", "stat_inf_count",
                               "stat_numel", "start_ns",       "end_ns"},
                 from, to);
    Memo<events::Side> sides;
    Memo<events::EdgeKind> edgeKinds;
    Memo<events::BridgeRole> roles;
    Memo<events::Direction> directions;
    Memo<events::Shape> shapes;
    Memo<events::Name> names;  // edge and dtype
    while (s.step()) {
      events::TransferRecord t;
      const int64_t id = s.i64(0);
      t.rank = bounded(s, 1, "transfers", "rank", 0, kLastRank);
      t.side = memoized(sides, "transfers", s, 2, enumOf<events::Side>("transfers", parseSide));
      t.srcRank = bounded(s, 3, "transfers", "src_rank", 0, kLastRank);
      t.dstRank = bounded(s, 4, "transfers", "dst_rank", 0, kLastRank);
      t.srcGroupRank = bounded(s, 5, "transfers", "src_group_rank", -1, kLastRank);
      t.dstGroupRank = bounded(s, 6, "transfers", "dst_group_rank", -1, kLastRank);
      t.edge = name(names, "transfers", s, 7);
      t.edgeKind = memoized(edgeKinds, "transfers", s, 8,
                            enumOf<events::EdgeKind>("transfers", parseEdgeKind));
      t.role = memoized(roles, "transfers", s, 9,
                        enumOf<events::BridgeRole>("transfers", parseBridgeRole));
      t.direction = memoized(directions, "transfers", s, 10,
                             enumOf<events::Direction>("transfers", parseDirection));
      t.iteration = bounded(s, 11, "transfers", "iteration", 0, kLastIteration);
      t.microbatch = bounded(s, 12, "transfers", "microbatch", -1, kLastMicrobatch);
      t.actionSeq = bounded(s, 13, "transfers", "action_seq", -1, kInt32Max);
      t.shape = memoized(shapes, "transfers", s, 14, shapeOf("transfers", "shape"));
      t.dtype = name(names, "transfers", s, 15);
      t.bytes = byteCount(s, 16, "transfers", "bytes");
      t.checksum = std::bit_cast<uint64_t>(s.i64(17));
      readStats("transfers", s, 18, &t.hasStats, &t.stats);
      t.startNs = s.i64(25);
      t.endNs = s.i64(26);
      if (opts_.payloads) {
        readPayload(s, 27, &t.payload);
        const std::string row = "row id " + std::to_string(id);
        payloadLength("transfers", row, t.payload.size(), t.shape, t.dtype);
        if (!t.payload.empty() && static_cast<int64_t>(t.payload.size()) != t.bytes)
          bad("transfers", row + ": payload of " + std::to_string(t.payload.size()) +
                               " bytes, but bytes = " + std::to_string(t.bytes));
      }
      put(id, std::move(t));
    }
  }

  // ---- gradients: the biggest table, read by two threads when it is large ----
  // (docs/run-file.md "Reading a run file"): the main thread reads the rows below rowid
  // `split_` after the other tables, a second thread (its own connection, the same snapshot)
  // the rows from `split_` on, meanwhile.  Both put their records into their own slots of one
  // vector sized from the row count (Slots), so no second copy of the records is made; a
  // failure on either side is reported as a serial read would report it first.

  // Where one thread puts the gradient records it reads: slots of m_.gradients grouped in
  // buckets, one per iteration where the table's iteration index counts the rows of each (a
  // record then lands among its iteration's records: sorting moves it within those, in
  // cache, instead of across the whole vector), else one.  Within a bucket the main thread's
  // slots come before the second's, each filled in file order, so the file order of a serial
  // read is kept wherever it matters (ties of the sort key).
  struct Slots {
    static constexpr uint32_t kNone = UINT32_MAX;
    events::GradientRecord* base = nullptr;
    std::vector<uint32_t> bucketOf;        // [iteration] -> bucket; empty: one bucket for all
    std::vector<size_t> first, next, end;  // per bucket: its first slot, next free, one past

    // Puts `g`; false when its bucket is full or it has none (the counts were wrong).
    bool put(events::GradientRecord&& g) {
      size_t b = 0;
      if (!bucketOf.empty()) {
        const auto it = static_cast<size_t>(g.iteration);  // 0..kLastIteration (bounded)
        if (it >= bucketOf.size() || bucketOf[it] == kNone) return false;
        b = bucketOf[it];
      }
      if (next[b] == end[b]) return false;
      base[next[b]++] = std::move(g);
      return true;
    }
  };

  // A read on a connection of its own, in a thread of its own, while this thread reads other
  // rows (docs/run-file.md "Reading a run file").  Only from a file in rollback-journal mode
  // (a merged run file): there the second connection's snapshot is the first one's, because
  // no writer can commit while the first holds its read lock; it still checks that it sees the
  // run row and the table's rowid range the first one saw (checkSameFile).
  struct SideRead {
    std::thread thread;
    std::mutex mutex;       // guards db: the interrupt must not reach a closed connection
    sqlite3* db = nullptr;  // its connection while open
    std::atomic<bool> cancelled{false};  // the main thread failed first and stops it
    std::exception_ptr error;            // what it threw; read after join
    std::atomic<int64_t> rowsDone{0};    // for progress, published every 4096 rows
    events::RunInfo run;                 // the run row the main connection read
    int64_t min = 0, max = 0;            // the table's rowid bounds as the main connection saw

    SideRead() = default;
    SideRead(const SideRead&) = delete;
    SideRead& operator=(const SideRead&) = delete;
    ~SideRead() { stop(); }  // the owner stops it before its derived members go (~Loader)
    void stop() {
      if (!thread.joinable()) return;
      cancelled = true;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (db) sqlite3_interrupt(db);
      }
      thread.join();
    }
    // Joins the thread; rethrows what it threw.
    void finish() {
      thread.join();
      if (error) std::rethrow_exception(error);
    }
    // Publishes the count of rows read every 4096, and stops when cancelled.
    void counted(int64_t rows) {
      if ((rows & 0xfff) != 0) return;
      rowsDone.store(rows, std::memory_order_relaxed);
      if (cancelled) throw std::runtime_error("cancelled");  // the main thread's error wins
    }
  };

  // The second gradients reader: the rowid range it reads (inclusive) and its slots, set
  // before it starts.
  struct SecondReader : SideRead {
    int64_t from = 0, to = 0;
    Slots slots;
    // Written by the thread, read after join: format-1 reference rows, in file order.
    std::vector<events::GradientRecord> references;
  };

  // The transfers, read in chunks of rowids by a side thread from the start and by this
  // thread once it reaches them (readTransfers): whichever is free takes the next chunk, so
  // neither waits long for the other (one side thread reading them all was the last to finish
  // by ~2 s of a message-heavy 10^7-event file).  Each chunk fills its own slots of the vectors
  // below, sized from the row counts up front: no record is copied twice.
  struct TransferReader : SideRead {
    struct Chunk {
      int64_t from = 0, to = 0;    // rowids, inclusive
      size_t first = 0, rows = 0;  // its slots: [first, first + rows), rows counted up front
      size_t read = 0;             // rows read so far
      std::exception_ptr error;    // its first failure (its rows after it are not read)
    };
    std::vector<Chunk> chunks;
    std::atomic<size_t> next{0};  // the next chunk to take
    // The first chunk known to have failed: the chunks after it are not taken (the error a
    // serial read reports is in it or before it), so an error or a cancelled load ends the
    // read after the chunks in hand, not after the whole table.
    std::atomic<size_t> failed{SIZE_MAX};
    std::vector<events::TransferRecord> transfers;
    std::vector<int64_t> transferIds;
  };

  // Reads transfer chunks of `r` (on this Loader's connection) until none is left before the
  // first failed one, or one of its own fails: each into its own slots, its first failure kept
  // in the chunk.  `onRow()` after each row.
  template <typename OnRow>
  void takeTransferChunks(TransferReader& r, OnRow onRow) {
    for (size_t k = r.next++; k < r.chunks.size() && k < r.failed; k = r.next++) {
      TransferReader::Chunk& c = r.chunks[k];
      try {
        readTransferRows(c.from, c.to, [&](int64_t id, events::TransferRecord&& t) {
          if (c.read == c.rows) chunkMiscounted(c);
          r.transferIds[c.first + c.read] = id;
          r.transfers[c.first + c.read] = std::move(t);
          ++c.read;
          onRow();
        });
      } catch (...) {
        c.error = std::current_exception();
        for (size_t f = r.failed; k < f && !r.failed.compare_exchange_weak(f, k);) {
        }
        return;
      }
    }
  }

  // Runs `read(loader)` on `r`'s thread with a Loader of its own connection, in a read
  // snapshot, after checking that the connection sees `table` as this one did.
  template <typename Read>
  void startSide(SideRead& r, const char* table, Read read) {
    r.run = m_.info;
    r.thread = std::thread([this, &r, table, read] {
      try {
        Db db(m_.path, Db::Mode::ReadOnly);
        db.setBusyTimeout(10000);
        {
          std::lock_guard<std::mutex> lock(r.mutex);
          r.db = db.handle();
        }
        struct Unpublish {  // before the connection closes
          SideRead& r;
          ~Unpublish() {
            std::lock_guard<std::mutex> lock(r.mutex);
            r.db = nullptr;
          }
        } unpublish{r};
        if (r.cancelled) return;
        Transaction snapshot(db, false);
        model::RunModel mine;
        mine.path = m_.path;
        mine.schemaVersion = m_.schemaVersion;
        mine.info.level = r.run.level;
        std::function<void(float)> none;
        Loader other(db, mine, opts_, none);
        other.packed_ = packed_;
        other.texts_ = texts_;
        other.known_ = known_;
        other.rows_ = rows_;  // to reserve its vectors
        other.checkSameFile(r.run, table, r.min, r.max);
        read(other, mine);
      } catch (...) {
        r.error = std::current_exception();
      }
    });
  }

  // Whether `table` (at least LoadOptions::parallelFromRows rows) may be read by a side
  // thread: a rollback-journal file; sets the rowid bounds the side will check.
  bool sideReadable(const char* table, SideRead& r) {
    const auto it = rows_.find(table);
    if (opts_.parallelFromRows <= 0 || it == rows_.end() || it->second < 2 ||
        it->second < opts_.parallelFromRows)
      return false;
    {
      Stmt mode = db_.prepare("PRAGMA journal_mode");
      if (!mode.step() || mode.text(0) == "wal") return false;
    }
    Stmt range = db_.prepare("SELECT min(rowid), max(rowid) FROM " + stored(table));
    if (!range.step() || range.isNull(0)) return false;
    r.min = range.i64(0);
    r.max = range.i64(1);
    return true;
  }

  // The transfers are read in chunks by a side thread while this one reads the actions (the
  // plan before them), then by both (TransferReader).
  void startTransferReader() {
    auto r = std::make_unique<TransferReader>();
    if (!sideReadable("transfers", *r) || !planTransferChunks(*r)) return;
    transfers_ = std::move(r);
    startSide(*transfers_, "transfers",
              [reader = transfers_.get()](Loader& other, model::RunModel&) {
                int64_t rows = 0;
                other.takeTransferChunks(*reader, [&] { reader->counted(++rows); });
              });
  }

  // Splits the transfers' rowids [r.min, r.max] into kTransferChunks ranges and sizes the
  // vectors: a merged file's rowids are dense, so a range holds as many rows as it spans;
  // otherwise each range's rows are counted.  False (read serially) for rowids spanning all
  // 2^64 values, whose span does not fit.
  static constexpr int64_t kTransferChunks = 32;
  bool planTransferChunks(TransferReader& r) {
    const int64_t n = rows_.at("transfers");
    const uint64_t span = static_cast<uint64_t>(r.max) - static_cast<uint64_t>(r.min) + 1;
    if (span == 0) return false;
    const bool dense = span == static_cast<uint64_t>(n);
    const uint64_t k = std::min<uint64_t>(kTransferChunks, span);
    Stmt count = db_.prepare("SELECT count(*) FROM " + stored("transfers") +
                             " WHERE rowid BETWEEN ?1 AND ?2");
    // Chunk i starts at rowid min + i * (span / k); the last one ends at max.
    auto start = [&](uint64_t i) {
      return static_cast<int64_t>(static_cast<uint64_t>(r.min) + span / k * i);
    };
    size_t first = 0;
    for (uint64_t i = 0; i < k; ++i) {
      TransferReader::Chunk c;
      c.from = start(i);
      c.to = i + 1 == k ? r.max : start(i + 1) - 1;
      c.first = first;
      if (dense) {
        c.rows =
            static_cast<size_t>(static_cast<uint64_t>(c.to) - static_cast<uint64_t>(c.from)) + 1;
      } else {
        count.bind(1, c.from);
        count.bind(2, c.to);
        count.step();
        c.rows = static_cast<size_t>(std::max<int64_t>(count.i64(0), 0));
        count.reset();
      }
      first += c.rows;
      r.chunks.push_back(std::move(c));
    }
    r.transfers.resize(first);
    r.transferIds.resize(first);
    return true;
  }

  // Two threads read the gradients when the table holds at least LoadOptions::parallelFromRows
  // rows, and only from a file in rollback-journal mode (a merged run file): there the second
  // connection's snapshot is the first one's, because no writer can commit while the first
  // holds its read lock.  A shard (WAL) is read by one thread.
  void startSecondReader() {
    if (selectsGradients()) return;
    auto r = std::make_unique<SecondReader>();
    if (!sideReadable("gradients", *r)) return;
    const int64_t n = rows_.at("gradients"), lo = r->min, hi = r->max;
    // Balance the threads: the main one also reads every other table (rows_ counts them) but
    // the transfers when a side thread reads those (then it only takes the chunks that thread
    // has not reached, a share the timing decides, so none is counted here).
    const int64_t mainRows = total_ - (transfers_ ? rows_.at("transfers") : 0);
    const int64_t secondRows = std::clamp<int64_t>(mainRows / 2, 1, n - 1);
    // hi - lo >= n - 1: rowids are distinct.  Dense (a merged file's rowids are): the rows
    // from `split` on are exactly hi - split + 1; otherwise split by the rowid span and count.
    const uint64_t gaps =
        static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) - static_cast<uint64_t>(n - 1);
    int64_t split = hi - secondRows + 1;
    int64_t second = secondRows;
    if (gaps != 0) {
      const double span = static_cast<double>(hi) - static_cast<double>(lo) + 1;
      const double from = static_cast<double>(hi) + 1 -
                          span * static_cast<double>(secondRows) / static_cast<double>(n);
      split = from <= static_cast<double>(lo) + 1 ? lo + 1
              : from >= static_cast<double>(hi)   ? hi
                                                  : static_cast<int64_t>(from);
      Stmt count = db_.prepare("SELECT count(*) FROM " + stored("gradients") +
                               " WHERE rowid >= " + std::to_string(split));
      count.step();
      second = std::clamp<int64_t>(count.i64(0), 0, n);
    }
    r->from = split;
    r->to = hi;
    split_ = split;
    m_.gradients = std::vector<events::GradientRecord>(static_cast<size_t>(n));
    planSlots(n, split, second, slots_, r->slots);
    second_ = std::move(r);
    startSide(*second_, "gradients",
              [reader = second_.get()](Loader& other, model::RunModel& mine) {
                int64_t rows = 0;
                other.readGradientRows(reader->from, reader->to, [&](events::GradientRecord&& g) {
                  if (!reader->slots.put(std::move(g))) other.miscounted();
                  reader->counted(++rows);
                });
                reader->references = std::move(mine.referenceGradients);
              });
  }

  // The slots of both threads: by iteration when the index gradients_by_param (iteration
  // first) counts the rows of each iteration below and from `split` to `n` in all, else one
  // bucket: the main thread's n - second slots, then the second thread's.
  void planSlots(int64_t n, int64_t split, int64_t second, Slots& mine, Slots& theirs) {
    mine.base = theirs.base = m_.gradients.data();
    std::vector<std::array<int64_t, 3>> counts;  // iteration, rows, rows from split
    if (packed_ && db_.queryInt("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                                "name = 'gradients_by_param'") == 1) {
      Stmt q = db_.prepare("SELECT iteration, count(*), sum(rowid >= ?1) FROM " +
                           stored("gradients") + " GROUP BY iteration");
      q.bind(1, split);
      int64_t rows = 0;
      while (q.step()) {
        // A NULL iteration reads as 0 (bounded); a value that is not one fails when its row is
        // read, so it needs no slot.
        const int type = q.type(0);
        const int64_t iteration = type == SQLITE_NULL ? 0 : q.i64(0);
        rows += q.i64(1);
        if (type != SQLITE_NULL && type != SQLITE_INTEGER) continue;
        if (iteration < 0 || iteration > kLastIteration) continue;
        if (!counts.empty() && counts.back()[0] == iteration) {  // NULL then 0
          counts.back()[1] += q.i64(1);
          counts.back()[2] += q.i64(2);
        } else {
          counts.push_back({iteration, q.i64(1), q.i64(2)});
        }
      }
      if (rows != n) counts.clear();
      std::sort(counts.begin(), counts.end());
    }
    auto addBucket = [](Slots& s, size_t first, size_t count) {
      s.first.push_back(first);
      s.next.push_back(first);
      s.end.push_back(first + count);
    };
    if (counts.empty()) {
      addBucket(mine, 0, static_cast<size_t>(n - second));
      addBucket(theirs, static_cast<size_t>(n - second), static_cast<size_t>(second));
      return;
    }
    const auto size = static_cast<size_t>(counts.back()[0]) + 1;
    mine.bucketOf.assign(size, Slots::kNone);
    size_t at = 0;
    for (const auto& [iteration, rows, fromSplit] : counts) {
      const auto below = static_cast<size_t>(rows - fromSplit);
      mine.bucketOf[static_cast<size_t>(iteration)] = static_cast<uint32_t>(mine.first.size());
      addBucket(mine, at, below);
      addBucket(theirs, at + below, static_cast<size_t>(fromSplit));
      at += static_cast<size_t>(rows);
    }
    theirs.bucketOf = mine.bucketOf;
  }

  [[noreturn]] void changed(const std::string& what) {
    throw RunFileError(Kind::Corrupt, m_.path + ": the file changed while it was read (" + what +
                                          "); read it again");
  }
  // The rows disagree with the counts their index gave (the same snapshot, so the index is
  // not the table's).
  [[noreturn]] void miscounted() {
    bad("gradients",
        "more rows than its index counts (a damaged index; sqlite3's REINDEX "
        "rebuilds it)");
  }
  [[noreturn]] void chunkMiscounted(const TransferReader::Chunk& c) {
    bad("transfers", "rowids " + std::to_string(c.from) + ".." + std::to_string(c.to) + " hold " +
                         (c.read < c.rows ? std::to_string(c.read) : "more") + " rows, but " +
                         std::to_string(c.rows) +
                         " were counted (a damaged table or index; sqlite3's REINDEX rebuilds "
                         "an index)");
  }
  // The second connection reads the same file as the first: the same run row and rowid range
  // of `table`.
  void checkSameFile(const events::RunInfo& first, const char* table, int64_t min, int64_t max) {
    Stmt run = db_.prepare("SELECT run_id, config_hash, end_unix_ms, status FROM run WHERE id = 1");
    const bool hasRun = run.step();
    if (hasRun != !first.runId.empty() ||
        (hasRun && (run.text(0) != first.runId || run.text(1) != first.configHash ||
                    run.i64(2) != first.endUnixMs ||
                    run.text(3) != std::string_view(events::toString(first.status)))))
      changed("its run row differs");
    Stmt range = db_.prepare("SELECT min(rowid), max(rowid) FROM " + stored(table));
    if (!range.step() || range.i64(0) != min || range.i64(1) != max)
      changed(std::string("its ") + table + " table differs");
  }

  void readGradients() {
    constexpr int64_t kFirst = std::numeric_limits<int64_t>::min();
    if (!second_) {
      // Only reduced rows: the vector grows as it reads (~3 % of a stats run's rows).
      if (!selectsGradients()) m_.gradients.reserve(reserveFor("gradients"));
      const int64_t read = readGradientRows(
          kFirst, std::numeric_limits<int64_t>::max(),
          [this](events::GradientRecord&& g) { m_.gradients.push_back(std::move(g)); });
      if (selectsGradients()) {
        // The rows not selected count as events (countRows counted every row).
        const auto counted = rows_.find("gradients");
        const int64_t notRead =
            std::max<int64_t>((counted == rows_.end() ? read : counted->second) - read, 0);
        m_.gradientsNotLoaded = static_cast<size_t>(notRead);
        done_ += notRead;  // progress: those rows are done too
      }
      return;
    }
    SecondReader& r = *second_;
    readGradientRows(kFirst, split_ - 1, [&](events::GradientRecord&& g) {
      if (!slots_.put(std::move(g))) miscounted();
    });
    r.finish();
    // Slots left empty (reference rows went to referenceGradients; an index that counted more
    // rows than there are): close the gaps, keeping the order.
    size_t at = 0;
    auto keep = [&](size_t from, size_t to) {
      if (at != from)
        std::move(m_.gradients.begin() + static_cast<std::ptrdiff_t>(from),
                  m_.gradients.begin() + static_cast<std::ptrdiff_t>(to),
                  m_.gradients.begin() + static_cast<std::ptrdiff_t>(at));
      at += to - from;
    };
    for (size_t b = 0; b < slots_.first.size(); ++b) {
      keep(slots_.first[b], slots_.next[b]);
      keep(r.slots.first[b], r.slots.next[b]);
    }
    m_.gradients.resize(at);
    for (auto& g : r.references) m_.referenceGradients.push_back(std::move(g));
    second_.reset();
  }

  // Reads the gradient rows with rowid in [from, to] in file order; each record goes to `put`,
  // a reference row (format 1) to m_.referenceGradients instead.
  template <typename Put>
  int64_t readGradientRows(int64_t from, int64_t to, Put put) {
    Stmt s = rowRange("gradients",
                      {"rank",
                       "iteration",
                       "microbatch",
                       "phase",
                       "param",
                       "module",
                       "tp",
                       "pp",
                       "dp",
                       "partition_dim",
                       "partition_offset",
                       "shape",
                       "full_shape",
                       "dtype",
                       "norm",
                       "checksum",
                       "stat_min",
                       "stat_max",
                       "stat_mean",
                       "stat_l2",
                       "stat_nan_count",
                       "stat_inf_count",
                       "stat_numel"},
                      from, to, selectsGradients() ? reducedPhaseFilter() : "");
    Memo<events::GradPhase> phases;
    Memo<events::Shape> shapes;  // shape and full_shape (one dictionary, one parse)
    Memo<events::Name> names;    // param, module and dtype
    int64_t read = 0;
    while (s.step()) {
      ++read;
      events::GradientRecord g;
      g.rank = bounded(s, 0, "gradients", "rank", -1, kLastRank);
      g.iteration = bounded(s, 1, "gradients", "iteration", 0, kLastIteration);
      g.microbatch = bounded(s, 2, "gradients", "microbatch", -1, kLastMicrobatch);
      g.phase = memoized(phases, "gradients", s, 3,
                         enumOf<events::GradPhase>("gradients", parseGradPhase));
      g.param = name(names, "gradients", s, 4);
      g.module = name(names, "gradients", s, 5);
      g.tp = bounded(s, 6, "gradients", "tp", -1, kLastRank);
      g.pp = bounded(s, 7, "gradients", "pp", -1, kLastRank);
      g.dp = bounded(s, 8, "gradients", "dp", -1, kLastRank);
      g.partitionDim = s.i32(9);
      g.partitionOffset = s.i64(10);
      g.shape = memoized(shapes, "gradients", s, 11, shapeOf("gradients", "shape"));
      g.fullShape = memoized(shapes, "gradients", s, 12, shapeOf("gradients", "full_shape"));
      checkPartition(g);
      g.dtype = name(names, "gradients", s, 13);
      real("gradients", s, 14, &g.norm, m_.info.level >= events::RecordLevel::Stats);
      g.checksum = std::bit_cast<uint64_t>(s.i64(15));
      readStats("gradients", s, 16, &g.hasStats, &g.stats);
      if (opts_.payloads &&
          !(opts_.comparedGradients && g.phase == events::GradPhase::Accumulated)) {
        readPayload(s, 23, &g.payload);
        payloadLength("gradients", gradientRow(g), g.payload.size(), g.shape, g.dtype);
      }
      // Format 1 kept the reference as rank -1 rows of `gradients`.
      if (g.phase == events::GradPhase::Reference)
        m_.referenceGradients.push_back(std::move(g));
      else
        put(std::move(g));
      tick();
    }
    return read;
  }

  // SQL condition selecting the gradient rows LoadOptions::onlyReducedGradients keeps: phase
  // `reduced`, and `reference` (format 1 kept the reference in this table).  Exactly the texts
  // parseGradPhase reads as those phases; in a packed table, their ids in `texts`.
  // With LoadOptions::comparedGradients also `param_initial` and `accumulated`.
  bool selectsGradients() const { return opts_.onlyReducedGradients || opts_.comparedGradients; }
  bool keptPhase(events::GradPhase p) const {
    if (p == events::GradPhase::Reduced || p == events::GradPhase::Reference) return true;
    return opts_.comparedGradients &&
           (p == events::GradPhase::ParamInitial || p == events::GradPhase::Accumulated);
  }
  std::string reducedPhaseFilter() const {
    auto kept = [this](std::string_view text) {
      events::GradPhase p{};
      return parseGradPhase(text, &p) && keptPhase(p);
    };
    if (!packed_) {
      std::string list;
      for (auto p : {events::GradPhase::Reduced, events::GradPhase::Reference,
                     events::GradPhase::ParamInitial, events::GradPhase::Accumulated}) {
        if (keptPhase(p))
          list += (list.empty() ? "'" : ", '") + std::string(events::toString(p)) + "'";
      }
      return "phase IN (" + list + ")";
    }
    std::string ids;
    for (size_t id = 0; id < texts_.size(); ++id) {
      if (known_[id] && kept(texts_[id])) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    }
    return ids.empty() ? "0" : storedReadExpr(tableDef("gradients"), "phase") + " IN (" + ids + ")";
  }

  // A shard of a partitioned gradient lies inside its full shape: the analysis copies it to
  // partition_offset along partition_dim of a buffer of full_shape's size.
  void checkPartition(const events::GradientRecord& g) {
    const std::vector<int64_t>& full = g.fullShape;
    const int dim = g.partitionDim;
    auto fail = [&](const std::string& why) {
      bad("gradients", "param '" + g.param + "' partition_dim " + std::to_string(dim) + " offset " +
                           std::to_string(g.partitionOffset) + ": " + why);
    };
    if (dim < -1 || dim >= static_cast<int>(std::max(g.shape.size(), full.size()))) {
      fail("no such dimension");
    }
    if (full.empty() || dim < 0) return;
    if (full.size() != g.shape.size()) fail("shape and full_shape differ in rank");
    for (size_t d = 0; d < full.size(); ++d) {
      if (static_cast<int>(d) != dim && g.shape[d] != full[d]) fail("shape outside full_shape");
    }
    if (g.partitionOffset < 0 || g.partitionOffset > full[dim] - g.shape[dim]) {
      fail("shard outside full_shape");
    }
  }

  void readLosses() {
    Stmt s = db_.prepare("SELECT rank, iteration, microbatch, dp, loss FROM losses ORDER BY rowid");
    while (s.step()) {
      events::LossRecord l{bounded(s, 0, "losses", "rank", -1, kLastRank),
                           bounded(s, 1, "losses", "iteration", 0, kLastIteration),
                           bounded(s, 2, "losses", "microbatch", -1, kLastMicrobatch),
                           bounded(s, 3, "losses", "dp", -1, kLastRank), 0.0};
      if (!real("losses", s, 4, &l.loss, true)) bad("losses", "loss is NULL");
      // Format 1 kept the reference as rank -1 rows of `losses`.
      (l.rank < 0 ? m_.referenceLosses : m_.losses).push_back(l);
      tick();
    }
  }

  // Captured jobs' module steps (events/ModuleStep.h); a file without the table has none.
  void readModuleSteps() {
    if (!db_.hasTable("module_steps")) return;
    Stmt s = db_.prepare(
        "SELECT rank, iteration, module, dp, normalisation, microbatches, tokens, global_tokens, "
        "loss_scale, loss_scale_after, found_inf, skipped FROM module_steps ORDER BY rowid");
    const char* t = "module_steps";
    while (s.step()) {
      events::ModuleStepRecord m;
      m.rank = bounded(s, 0, t, "rank", 0, kLastRank, false);
      m.iteration = bounded(s, 1, t, "iteration", 0, kLastIteration);
      m.module = events::Name(s.text(2));
      m.dp = bounded(s, 3, t, "dp", -1, kLastRank);
      if (!s.isNull(4)) {
        m.normalisation = parse<events::LossNormalisation>(
            t, s.text(4), [](std::string_view v, events::LossNormalisation* o) {
              return events::parseLossNormalisation(std::string(v), o);
            });
        m.microbatches = bounded(s, 5, t, "microbatches", -1, kLastMicrobatch + 1);
        integer(s, 6, t, "tokens", true);
        integer(s, 7, t, "global_tokens", true);
        m.tokens = s.isNull(6) ? -1 : std::max<int64_t>(-1, s.i64(6));
        m.globalTokens = s.isNull(7) ? -1 : std::max<int64_t>(-1, s.i64(7));
      }
      real(t, s, 8, &m.lossScale);
      real(t, s, 9, &m.lossScaleAfter);
      if (!s.isNull(10)) m.foundInf = bounded(s, 10, t, "found_inf", 0, 1) ? 1 : 0;
      if (!s.isNull(11)) m.skipped = bounded(s, 11, t, "skipped", 0, 1) ? 1 : 0;
      m_.moduleSteps.push_back(std::move(m));
    }
  }

  void readReferenceLosses() {
    Stmt s =
        db_.prepare("SELECT iteration, microbatch, dp, loss FROM reference_losses ORDER BY rowid");
    while (s.step()) {
      events::LossRecord l{-1, s.i32(0), s.i32(1), s.i32(2), 0.0};
      if (!real("reference_losses", s, 3, &l.loss)) bad("reference_losses", "loss is NULL");
      m_.referenceLosses.push_back(l);
    }
  }

  void readReferenceGradients() {
    const std::string payload = opts_.payloads ? "payload" : "NULL";
    Stmt s = db_.prepare(
        "SELECT iteration, param, module, shape, dtype, norm, checksum, stat_min, stat_max, "
        "stat_mean, stat_l2, stat_nan_count, stat_inf_count, stat_numel, " +
        payload + " FROM reference_gradients ORDER BY rowid");
    while (s.step()) {
      events::GradientRecord g;
      g.phase = events::GradPhase::Reference;
      g.iteration = s.i32(0);
      g.param = s.text(1);
      g.module = s.text(2);
      std::vector<int64_t> dims;
      list("reference_gradients", s.text(3), &dims);
      g.shape = dims;
      g.fullShape = g.shape;
      g.dtype = s.text(4);
      real("reference_gradients", s, 5, &g.norm);
      g.checksum = std::bit_cast<uint64_t>(s.i64(6));
      readStats("reference_gradients", s, 7, &g.hasStats, &g.stats);
      if (opts_.payloads) {
        readPayload(s, 14, &g.payload);
        payloadLength("reference_gradients", gradientRow(g), g.payload.size(), dims, g.dtype);
      }
      m_.referenceGradients.push_back(std::move(g));
    }
  }

  // Which captured point-to-point ops one batch_isend_irecv posted (docs/run-file.md
  // "p2p_batches"); a file without the table records none and says so (batchesRecorded).
  void readBatchMembers() {
    if (!db_.hasTable("p2p_batches")) return;
    m_.batchesRecorded = true;
    Stmt s = db_.prepare(
        "SELECT rank, iteration, seq, batch, group_ranks FROM p2p_batches ORDER BY rowid");
    while (s.step()) {
      events::BatchMemberRecord b;
      b.rank = bounded(s, 0, "p2p_batches", "rank", 0, kLastRank);
      b.iteration = bounded(s, 1, "p2p_batches", "iteration", 0, kLastIteration);
      b.seq = bounded(s, 2, "p2p_batches", "seq", 0, kInt32Max);
      b.batch = bounded(s, 3, "p2p_batches", "batch", 0, kInt32Max);
      list("p2p_batches", s.text(4), &b.groupRanks);
      for (int r : b.groupRanks) {
        if (r < 0 || r > kLastRank) bad("p2p_batches", "group rank " + std::to_string(r));
      }
      m_.batchMembers.push_back(b);
      tick();
    }
  }

  // Planted faults; a file written before their table existed has them only in its
  // `fault_injected` sentences ("fault injection (delay 10 s,drop) on rank 1's send of ..."),
  // read here, the one place that reads them.
  void readInjectedFaults() {
    if (!db_.hasTable("injected_faults")) {
      for (const auto& d : m_.diagnoses)
        if (d.kind == events::DiagnosisKind::FaultInjected)
          m_.injectedFaults.push_back(faultOfSentence(d));
      return;
    }
    Stmt s = db_.prepare(
        "SELECT rank, iteration, action_seq, peer, kinds, delay_s, time_ns FROM injected_faults "
        "ORDER BY rowid");
    while (s.step()) {
      events::InjectedFaultRecord f;
      f.rank = bounded(s, 0, "injected_faults", "rank", 0, kLastRank);
      f.iteration = bounded(s, 1, "injected_faults", "iteration", -1, kLastIteration);
      f.actionSeq = bounded(s, 2, "injected_faults", "action_seq", -1, kInt32Max);
      f.peer = bounded(s, 3, "injected_faults", "peer", -1, kLastRank);
      f.kinds = events::splitFaultKinds(s.text(4));
      real("injected_faults", s, 5, &f.delaySeconds);
      f.timeNs = s.i64(6);
      m_.injectedFaults.push_back(std::move(f));
    }
  }

  // A format-3 file's fault_injected diagnosis as a record: the kinds are the parenthesis's
  // comma list ("delay 10 s" gives the delay's length).
  static events::InjectedFaultRecord faultOfSentence(const events::DiagnosisRecord& d) {
    events::InjectedFaultRecord f;
    f.rank = d.rank;
    f.iteration = d.iteration;
    f.actionSeq = d.actionSeq;
    f.peer = d.waitsOnRank;
    f.timeNs = d.timeNs;
    const size_t open = d.message.find('('), close = d.message.find(')', open);
    if (open != std::string::npos && close != std::string::npos)
      events::readFaultPhrase(std::string_view(d.message).substr(open + 1, close - open - 1), &f);
    return f;
  }

  void readWaits() {
    Stmt s = db_.prepare(
        "SELECT rank, iteration, action_seq, action, microbatch, peer, op, edge, direction, "
        "timeout_s, error, time_ns FROM waits ORDER BY rowid");
    while (s.step()) {
      events::WaitRecord w;
      w.rank = s.i32(0);
      w.iteration = s.i32(1);
      w.actionSeq = s.i32(2);
      w.action = parse<events::ActionKind>("waits", s.text(3), parseActionKindText);
      w.microbatch = s.i32(4);
      w.peer = s.i32(5);
      w.op = parse<events::WaitOp>("waits", s.text(6), [](std::string_view t, auto* o) {
        return events::parseWaitOp(std::string(t), o);
      });
      assign(w.edge, s.text(7));
      w.direction = parse<events::Direction>("waits", s.text(8), parseDirection);
      real("waits", s, 9, &w.timeoutSeconds);
      assign(w.error, s.text(10));
      w.timeNs = s.i64(11);
      m_.waits.push_back(std::move(w));
    }
  }

  void readInputs() {
    const std::string payload = opts_.payloads ? "payload" : "NULL";
    Stmt s = db_.prepare("SELECT rank, iteration, microbatch, module, name, shape, dtype, " +
                         payload + " FROM inputs ORDER BY rowid");
    while (s.step()) {
      events::InputRecord in;
      in.rank = bounded(s, 0, "inputs", "rank", -1, kLastRank);
      in.iteration = bounded(s, 1, "inputs", "iteration", 0, kLastIteration);
      in.microbatch = bounded(s, 2, "inputs", "microbatch", -1, kLastMicrobatch);
      in.module = s.text(3);
      in.name = s.text(4);
      std::vector<int64_t> dims;
      shape("inputs", "shape", s.text(5), &dims);
      in.shape = dims;
      in.dtype = s.text(6);
      if (opts_.payloads) {
        readPayload(s, 7, &in.payload);
        payloadLength("inputs",
                      "rank " + std::to_string(in.rank) + " iteration " +
                          std::to_string(in.iteration) + " microbatch " +
                          std::to_string(in.microbatch) + " " +
                          std::string(std::string_view(in.name)),
                      in.payload.size(), dims, in.dtype);
      }
      m_.inputs.push_back(std::move(in));
    }
  }

  // A signal number as a process's wait status can carry it (7 bits).
  static constexpr int64_t kLastSignal = 127;

  void readDiagnoses() {
    // A file written before the `signal` column was added (within format 3) has none.
    const bool signals =
        db_.queryInt("SELECT count(*) FROM pragma_table_info('diagnoses') WHERE name = 'signal'") >
        0;
    Stmt s = db_.prepare(
        std::string("SELECT rank, kind, iteration, action_seq, waits_on_rank, message, time_ns, ") +
        (signals ? "signal" : "NULL") + " FROM diagnoses ORDER BY rowid");
    while (s.step()) {
      events::DiagnosisRecord d;
      d.rank = bounded(s, 0, "diagnoses", "rank", -1, kLastRank);
      // A kind this build does not know (a newer writer's) is kept as its text.
      if (!events::parseDiagnosisKind(s.text(1), &d.kind)) assign(d.otherKind, s.text(1));
      d.iteration = bounded(s, 2, "diagnoses", "iteration", -1, kLastIteration);
      d.actionSeq = bounded(s, 3, "diagnoses", "action_seq", -1, kInt32Max);
      d.waitsOnRank = bounded(s, 4, "diagnoses", "waits_on_rank", -1, kLastRank);
      assign(d.message, s.text(5));
      d.timeNs = s.i64(6);
      d.signal =
          s.isNull(7) ? signalOfSentence(d) : bounded(s, 7, "diagnoses", "signal", 0, kLastSignal);
      m_.diagnoses.push_back(std::move(d));
    }
  }

  // The signal of a record written without its `signal` (an older file, or a row merged from
  // an older build's shard), read from its sentence, the one place that reads it there: the
  // peer_dead and rank_killed records that name it say "killed by signal N (NAME)" of the rank
  // they tell of.  Other kinds are not read: a rank's own timeout or error may quote another
  // rank's end ("root cause: rank 2 ... killed by signal 9").  0 when the sentence names none.
  static int32_t signalOfSentence(const events::DiagnosisRecord& d) {
    if (d.kind != events::DiagnosisKind::PeerDead && d.kind != events::DiagnosisKind::RankKilled)
      return 0;
    static constexpr std::string_view kPhrase = "killed by signal ";
    const size_t at = d.message.find(kPhrase);
    if (at == std::string::npos) return 0;
    int32_t signal = 0;
    const char* first = d.message.data() + at + kPhrase.size();
    const auto [end, ec] = std::from_chars(first, d.message.data() + d.message.size(), signal);
    return ec == std::errc() && end != first && signal > 0 && signal <= kLastSignal ? signal : 0;
  }

  // Captured jobs that recorded roles only; files written before the table existed have none.
  void readMessageRoles() {
    if (!db_.hasTable("message_roles")) return;
    Stmt s = db_.prepare(
        "SELECT rank, iteration, action_seq, side, carries, peer, call FROM message_roles "
        "ORDER BY rowid");
    while (s.step()) {
      events::MessageRoleRecord r;
      r.rank = bounded(s, 0, "message_roles", "rank", 0, kLastRank);
      r.iteration = bounded(s, 1, "message_roles", "iteration", -1, kLastIteration);
      r.actionSeq = bounded(s, 2, "message_roles", "action_seq", -1, kInt32Max);
      r.side = parse<events::Side>("message_roles", s.text(3), parseSide);
      r.carries = parse<events::Direction>("message_roles", s.text(4), parseDirection);
      const std::string_view peer = s.text(5);
      if (peer != "next" && peer != "previous")
        bad("message_roles", "peer '" + std::string(peer) + "': expected next or previous");
      r.peerIsNext = peer == "next";
      assign(r.call, s.text(6));
      m_.messageRoles.push_back(std::move(r));
    }
  }

  // Captured jobs only; files written before the table existed have none.
  void readCollectives() {
    if (!db_.hasTable("collectives")) return;
    const std::string payload = opts_.payloads ? "payload" : "NULL";
    Stmt s = db_.prepare(
        "SELECT rank, iteration, seq, group_seq, op, group_name, group_rank, group_size, "
        "group_ranks, root, reduce_op, shape, dtype, bytes, in_checksum, out_checksum, stat_min, "
        "stat_max, stat_mean, stat_l2, stat_nan_count, stat_inf_count, stat_numel, start_ns, "
        "end_ns, state, " +
        payload + " FROM collectives ORDER BY rowid");
    while (s.step()) {
      events::CollectiveRecord c;
      c.rank = bounded(s, 0, "collectives", "rank", -1, kLastRank);
      c.iteration = bounded(s, 1, "collectives", "iteration", -1, kLastIteration);
      c.seq = s.i32(2);
      c.groupSeq = s.i32(3);
      assign(c.op, s.text(4));
      assign(c.group, s.text(5));
      c.groupRank = bounded(s, 6, "collectives", "group_rank", -1, kLastRank);
      c.groupSize = bounded(s, 7, "collectives", "group_size", 0, kMaxRanks);
      list("collectives", s.text(8), &c.groupRanks);
      for (auto r : c.groupRanks) {
        if (r < 0 || r > kLastRank) bad("collectives", "group rank " + std::to_string(r));
      }
      c.root = bounded(s, 9, "collectives", "root", -1, kLastRank);
      assign(c.reduceOp, s.text(10));
      shape("collectives", "shape", s.text(11), &c.shape);
      assign(c.dtype, s.text(12));
      c.bytes = byteCount(s, 13, "collectives", "bytes");
      c.inChecksum = std::bit_cast<uint64_t>(s.i64(14));
      c.outChecksum = std::bit_cast<uint64_t>(s.i64(15));
      readStats("collectives", s, 16, &c.hasStats, &c.stats);
      c.startNs = s.i64(23);
      c.endNs = s.i64(24);
      assign(c.state, s.text(25));
      if (opts_.payloads) readPayload(s, 26, &c.payload);
      m_.collectives.push_back(std::move(c));
    }
  }

  // Decides `partial`: shards not (fully) merged, shard files never merged, ranks without a
  // merged shard.
  void readShards() {
    if (!db_.hasTable("shards")) {
      m_.partial = true;
      m_.notes.push_back(m_.path + " is a rank shard, not a merged run file");
      return;
    }
    std::set<std::string> mergedFiles;
    std::set<int> mergedRanks;
    Stmt s = db_.prepare("SELECT file, rank, state, note FROM shards ORDER BY id");
    while (s.step()) {
      const std::string file(s.text(0));
      const std::string state(s.text(2));
      if (state == "merged") {
        mergedFiles.insert(file);
        mergedRanks.insert(bounded(s, 1, "shards", "rank", -1, kLastRank));
        continue;
      }
      m_.partial = true;
      std::string note = "shard " + file + ": " + state;
      if (state == "merging") note += " (merge did not finish; re-run the merge)";
      if (!s.isNull(3)) note += " — " + std::string(s.text(3));
      m_.notes.push_back(note);
    }
    for (const auto& shard : findShards(m_.path)) {
      const std::string file = std::filesystem::path(shard).filename().string();
      if (!mergedFiles.count(file)) {
        m_.partial = true;
        m_.notes.push_back("shard " + file + " exists but was never merged");
      }
    }
    for (int r = 0; r < m_.info.worldSize; ++r) {  // bounded by readRun
      if (!mergedRanks.count(r)) {
        m_.partial = true;
        m_.notes.push_back("rank " + std::to_string(r) + ": no merged shard");
      }
    }
  }

  Db& db_;
  model::RunModel& m_;
  const LoadOptions& opts_;
  std::function<void(float)>& progress_;
  int64_t total_ = 0, done_ = 0;
  // The second gradients reader (startSecondReader) while it runs, the first rowid it reads,
  // and this thread's slots for the rows below.
  std::unique_ptr<SecondReader> second_;
  int64_t split_ = 0;
  std::unique_ptr<TransferReader> transfers_;  // startTransferReader's, while it runs
  Slots slots_;                                // the main thread's
  std::map<std::string, int64_t> rows_;        // countRows: rows per logical table
  bool packed_ = false;                        // the file has `texts` (a format-3 run file)
  std::vector<std::string> texts_;             // texts_[id] = text of that id
  std::vector<bool> known_;                    // ids present in `texts`
};

// ---- post-processing -----------------------------------------------------------------------

// v[k] becomes the old v[order[k]], in place (cycle by cycle, one record in hand): a second
// array of millions of records would double the model's peak memory.  `order` is a
// permutation of 0..v.size()-1 (of any unsigned integer type); it is consumed.
template <typename T, typename Index>
void permute(std::vector<T>& v, std::vector<Index>& order) {
  // Following a cycle is a chain of dependent loads, each a cache (and TLB) miss once `v` is
  // large: 3 M transfer records took ~1.5 s here.  The record kLookahead steps further along
  // the cycle is prefetched, so that many misses are in flight at once; the walk ahead reads
  // only `order` (4-8 B per record).
  constexpr int kLookahead = 16;
  auto prefetch = [&v](size_t k) {
    const char* p = reinterpret_cast<const char*>(v.data() + k);
    for (size_t line = 0; line < sizeof(T); line += 64) __builtin_prefetch(p + line, 1);
  };
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] == i) continue;
    T held = std::move(v[i]);
    size_t j = i;
    size_t ahead = i;
    for (int d = 0; d < kLookahead; ++d) ahead = static_cast<size_t>(order[ahead]);
    while (order[j] != i) {
      const size_t k = static_cast<size_t>(order[j]);
      prefetch(ahead);
      ahead = static_cast<size_t>(order[ahead]);
      v[j] = std::move(v[k]);
      order[j] = static_cast<Index>(j);
      j = k;
    }
    v[j] = std::move(held);
    order[j] = static_cast<Index>(j);
  }
}

// a - b with two's-complement wrap-around: times and offsets come from a file, and a corrupt
// pair must not be signed overflow (undefined behaviour) in the subtraction.
int64_t minusWrapping(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

void applyClockOffsets(model::RunModel& m) {
  for (size_t i = 0; i < m.ranks.size(); ++i) {
    const auto& r = m.ranks[i];
    if (i > 0 && m.ranks[i - 1].rank == r.rank) continue;  // a colocated rank's further rows
    const int64_t off = r.clockOffsetNs;
    if (off == 0) continue;
    if (static_cast<size_t>(r.rank) < m.actions.size()) {
      for (auto& a : m.actions[static_cast<size_t>(r.rank)]) {
        a.startNs = minusWrapping(a.startNs, off);
        a.endNs = minusWrapping(a.endNs, off);
      }
    }
  }
  std::vector<int64_t> offset;
  for (const auto& r : m.ranks) {
    if (offset.size() <= static_cast<size_t>(r.rank))
      offset.resize(static_cast<size_t>(r.rank) + 1);
    offset[static_cast<size_t>(r.rank)] = r.clockOffsetNs;
  }
  auto off = [&](int rank) {
    return rank >= 0 && static_cast<size_t>(rank) < offset.size() ? offset[rank] : 0;
  };
  for (auto& t : m.transfers) {
    t.startNs = minusWrapping(t.startNs, off(t.rank));
    t.endNs = minusWrapping(t.endNs, off(t.rank));
  }
  for (auto& d : m.diagnoses) d.timeNs = minusWrapping(d.timeNs, off(d.rank));
  for (auto& c : m.collectives) {
    c.startNs = minusWrapping(c.startNs, off(c.rank));
    c.endNs = minusWrapping(c.endNs, off(c.rank));
  }
  for (auto& w : m.waits) w.timeNs = minusWrapping(w.timeNs, off(w.rank));
  for (auto& f : m.injectedFaults) f.timeNs = minusWrapping(f.timeNs, off(f.rank));
  m.clockOffsetsApplied = true;
}

void sortActions(std::vector<std::vector<events::ActionRecord>>& lists) {
  auto less = [](const events::ActionRecord& a, const events::ActionRecord& b) {
    return std::tie(a.iteration, a.seq) < std::tie(b.iteration, b.seq);
  };
  for (auto& l : lists)
    if (!std::is_sorted(l.begin(), l.end(), less)) std::stable_sort(l.begin(), l.end(), less);
}

// Sorts transfers by (iteration, microbatch, edge, direction, srcRank, dstRank, side, file order).
void sortTransfers(model::RunModel& m) {
  // The key packed into integers compared in order (3 compares, not 8): the loader bounded
  // every field (iteration < 2^20, microbatch + 1 < 2^17, ranks < 2^12; a direction is 0 or
  // 1, a side 0 or 1), so each field keeps its place and ordering.
  struct Key {
    uint64_t iterationMicrobatch;  // iteration << 32 | (microbatch + 1)
    uint64_t edgeRest;  // edge rank << 32 | direction << 25 | src << 13 | dst << 1 | side
    uint32_t index;     // file order
    bool operator<(const Key& o) const {
      if (iterationMicrobatch != o.iterationMicrobatch)
        return iterationMicrobatch < o.iterationMicrobatch;
      if (edgeRest != o.edgeRest) return edgeRest < o.edgeRest;
      return index < o.index;
    }
  };
  std::vector<Key> keys;
  {
    const std::vector<uint32_t> edges = model::edgeRanks(m.transfers);
    keys.reserve(m.transfers.size());
    for (size_t i = 0; i < m.transfers.size(); ++i) {
      const auto& t = m.transfers[i];
      const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
      keys.push_back({u(t.iteration) << 32 | u(t.microbatch + 1),
                      u(edges[i]) << 32 | u(static_cast<uint8_t>(t.direction)) << 25 |
                          u(t.srcRank) << 13 | u(t.dstRank) << 1 | u(static_cast<uint8_t>(t.side)),
                      static_cast<uint32_t>(i)});
    }
  }
  if (std::is_sorted(keys.begin(), keys.end())) return;
  std::sort(keys.begin(), keys.end());
  std::vector<uint32_t> order;
  order.reserve(keys.size());
  for (const auto& k : keys) order.push_back(k.index);
  keys = {};
  // The ids (8 B each) are gathered into a new vector: independent loads, where following
  // the cycles in place is a chain of dependent misses.
  if (m.transferIds.size() == order.size()) {
    std::vector<int64_t> ids(order.size());
    for (size_t k = 0; k < order.size(); ++k) ids[k] = m.transferIds[order[k]];
    m.transferIds = std::move(ids);
  }
  permute(m.transfers, order);
}

// Sorts gradients by (iteration, phase, param, tp, pp, dp, microbatch, file order), the param
// by the rank of its name among the distinct names (few: each is compared once, here).  Each
// record's fields are packed into one 64-bit key, each field in the bits its largest value in
// this run needs and the record's index in the lowest bits (so ties keep file order): the sort
// moves and compares 8-byte integers, never records or texts, and the records are then
// permuted in place.  Fields that need more than 64 bits in all (not seen in real runs) are
// sorted by comparing them one by one instead.
void sortGradients(std::vector<events::GradientRecord>& gradients) {
  const size_t n = gradients.size();
  std::vector<events::Name> names;
  std::unordered_map<events::Name, uint32_t> rankOf;
  for (const auto& g : gradients)
    if (rankOf.try_emplace(g.param, 0).second) names.push_back(g.param);
  std::sort(names.begin(), names.end());
  for (uint32_t i = 0; i < names.size(); ++i) rankOf[names[i]] = i;
  // The rank of record i's param (consecutive records mostly share theirs: one lookup each run).
  events::Name last;
  uint32_t lastRank = 0;
  auto paramRank = [&](size_t i) {
    if (gradients[i].param != last || i == 0) {
      last = gradients[i].param;
      lastRank = rankOf[last];
    }
    return lastRank;
  };
  // The key's fields, most significant first; the reader bounds each to 0..2^20 (-1 stored +1).
  constexpr size_t kFields = 7;
  auto fields = [&](size_t i, uint32_t param) {
    const auto& g = gradients[i];
    auto up = [](int32_t v) { return static_cast<uint64_t>(static_cast<int64_t>(v) + 1); };
    return std::array<uint64_t, kFields>{static_cast<uint64_t>(g.iteration),
                                         static_cast<uint64_t>(g.phase),
                                         param,
                                         up(g.tp),
                                         up(g.pp),
                                         up(g.dp),
                                         up(g.microbatch)};
  };
  std::array<uint64_t, kFields> maxima{};
  for (size_t i = 0; i < n; ++i) {
    const auto f = fields(i, paramRank(i));
    for (size_t k = 0; k < kFields; ++k) maxima[k] = std::max(maxima[k], f[k]);
  }
  std::array<int, kFields> width{};
  int bits = n > 1 ? std::bit_width(n - 1) : 0;  // the index
  const int indexBits = bits;
  for (size_t k = 0; k < kFields; ++k) bits += width[k] = std::bit_width(maxima[k]);
  if (bits <= 64) {
    // One array: the keys, sorted, then each reduced to its index (the permutation).
    std::vector<uint64_t> keys(n);
    for (size_t i = 0; i < n; ++i) {
      const auto f = fields(i, paramRank(i));
      uint64_t key = 0;
      for (size_t k = 0; k < kFields; ++k) key = key << width[k] | f[k];
      keys[i] = key << indexBits | i;
    }
    if (std::is_sorted(keys.begin(), keys.end())) return;
    std::sort(keys.begin(), keys.end());
    const uint64_t indexMask = indexBits ? ~uint64_t{0} >> (64 - indexBits) : 0;
    for (auto& k : keys) k &= indexMask;
    permute(gradients, keys);
  } else {
    std::vector<uint32_t> ranks(n);
    for (size_t i = 0; i < n; ++i) ranks[i] = paramRank(i);
    std::vector<uint32_t> order(n);
    for (uint32_t i = 0; i < n; ++i) order[i] = i;
    auto less = [&](uint32_t a, uint32_t b) { return fields(a, ranks[a]) < fields(b, ranks[b]); };
    if (std::is_sorted(order.begin(), order.end(), less)) return;
    std::stable_sort(order.begin(), order.end(), less);
    permute(gradients, order);
  }
}

void sortRest(model::RunModel& m) {
  std::stable_sort(m.collectives.begin(), m.collectives.end(), [](const auto& a, const auto& b) {
    return std::tie(a.iteration, a.group, a.groupSeq, a.rank) <
           std::tie(b.iteration, b.group, b.groupSeq, b.rank);
  });
  sortGradients(m.gradients);
  std::stable_sort(m.moduleSteps.begin(), m.moduleSteps.end(), [](const auto& a, const auto& b) {
    return std::make_tuple(a.iteration, a.module.str(), a.rank) <
           std::make_tuple(b.iteration, b.module.str(), b.rank);
  });
  std::stable_sort(m.losses.begin(), m.losses.end(), [](const auto& a, const auto& b) {
    return std::tie(a.iteration, a.microbatch, a.dp, a.rank) <
           std::tie(b.iteration, b.microbatch, b.dp, b.rank);
  });
  std::stable_sort(m.inputs.begin(), m.inputs.end(), [](const auto& a, const auto& b) {
    return std::tie(a.iteration, a.microbatch, a.rank, a.module, a.name) <
           std::tie(b.iteration, b.microbatch, b.rank, b.module, b.name);
  });
  std::stable_sort(m.diagnoses.begin(), m.diagnoses.end(), [](const auto& a, const auto& b) {
    return std::tie(a.timeNs, a.rank) < std::tie(b.timeNs, b.rank);
  });
  std::stable_sort(m.waits.begin(), m.waits.end(), [](const auto& a, const auto& b) {
    return std::tie(a.timeNs, a.rank) < std::tie(b.timeNs, b.rank);
  });
  std::stable_sort(m.injectedFaults.begin(), m.injectedFaults.end(),
                   [](const auto& a, const auto& b) {
                     return std::tie(a.timeNs, a.rank) < std::tie(b.timeNs, b.rank);
                   });
  std::stable_sort(m.batchMembers.begin(), m.batchMembers.end(), [](const auto& a, const auto& b) {
    return std::tie(a.rank, a.iteration, a.seq) < std::tie(b.rank, b.iteration, b.seq);
  });
  std::stable_sort(m.referenceLosses.begin(), m.referenceLosses.end(),
                   [](const auto& a, const auto& b) {
                     return std::tie(a.iteration, a.microbatch, a.dp) <
                            std::tie(b.iteration, b.microbatch, b.dp);
                   });
  std::stable_sort(m.referenceGradients.begin(), m.referenceGradients.end(),
                   [](const auto& a, const auto& b) {
                     return std::tie(a.iteration, a.param) < std::tie(b.iteration, b.param);
                   });
}

void computeTimeRange(model::RunModel& m) {
  bool any = false;
  auto take = [&](int64_t start, int64_t end) {
    if (!any) {
      m.minTimeNs = start;
      m.maxTimeNs = end;
      any = true;
    }
    m.minTimeNs = std::min(m.minTimeNs, start);
    m.maxTimeNs = std::max(m.maxTimeNs, end);
  };
  for (const auto& l : m.actions)
    for (const auto& a : l) take(a.startNs, a.endNs);
  if (!any)  // no actions recorded: fall back to transfers
    for (const auto& t : m.transfers) take(t.startNs, t.endNs);
}

}  // namespace

bool sameRunRow(const model::RunModel& a, const model::RunModel& b) {
  return a.schemaVersion == b.schemaVersion && a.info.runId == b.info.runId &&
         a.info.configHash == b.info.configHash && a.info.status == b.info.status &&
         a.info.endUnixMs == b.info.endUnixMs;
}

void mergeDetails(model::RunModel& timeline, model::RunModel&& details) {
  timeline.plan = std::move(details.plan);
  timeline.gradients = std::move(details.gradients);
  timeline.gradientsNotLoaded = details.gradientsNotLoaded;
  timeline.losses = std::move(details.losses);
  timeline.inputs = std::move(details.inputs);
  timeline.referenceLosses = std::move(details.referenceLosses);
  timeline.referenceGradients = std::move(details.referenceGradients);
}

namespace {

bool loadsInPhases(const std::string& path, const LoadOptions& opts) {
  if (opts.parallelPhasesFromBytes <= 0 || opts.timelineOnly || opts.detailsOnly || opts.statusOnly)
    return false;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  return !ec && bytes >= static_cast<uintmax_t>(opts.parallelPhasesFromBytes);
}

// The timeline on this thread, the details on another; nullopt when either failed, they read
// different run rows, or the run is still running (the caller then reads serially, in one
// snapshot).  Progress: the mean of the two.
std::optional<model::RunModel> loadInPhases(const std::string& path, const LoadOptions& opts,
                                            const std::function<void(float)>& progress) {
  LoadOptions timelineOpts = opts, detailsOpts = opts;
  timelineOpts.timelineOnly = true;
  detailsOpts.detailsOnly = true;
  timelineOpts.parallelPhasesFromBytes = detailsOpts.parallelPhasesFromBytes = 0;
  std::atomic<float> detailsDone{0};
  std::optional<model::RunModel> details;
  std::exception_ptr detailsError;
  std::thread second([&] {
    try {
      details = loadRun(path, detailsOpts,
                        [&](float f) { detailsDone.store(f, std::memory_order_relaxed); });
    } catch (...) {
      detailsError = std::current_exception();
    }
    detailsDone.store(1.0f, std::memory_order_relaxed);
  });
  auto report = [&](float timelineDone) {
    if (progress)
      progress(
          std::min(0.99f, 0.5f * (timelineDone + detailsDone.load(std::memory_order_relaxed))));
  };
  std::optional<model::RunModel> timeline;
  try {
    timeline = loadRun(path, timelineOpts, report);
  } catch (...) {
  }
  while (detailsDone.load(std::memory_order_relaxed) < 1.0f) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    report(1.0f);
  }
  second.join();
  // A run still running may gain rows between the two reads without its run row changing:
  // only a finished run's two halves are taken together.
  if (!timeline || !details || detailsError || !sameRunRow(*timeline, *details) ||
      timeline->info.status == events::RunStatus::Running)
    return {};
  mergeDetails(*timeline, std::move(*details));
  return timeline;
}

}  // namespace

model::RunModel loadRun(const std::string& path, const LoadOptions& opts,
                        std::function<void(float)> progress) {
  if (loadsInPhases(path, opts)) {
    if (auto whole = loadInPhases(path, opts, progress)) {
      if (progress) progress(1.0f);
      return std::move(*whole);
    }
  }
  model::RunModel m;
  m.path = path;
  Db db = openStagescopeFile(path, false);
  try {
    if (opts.verify) {
      Stmt q = db.prepare("PRAGMA quick_check");
      if (q.step() && q.text(0) != "ok")
        throw RunFileError(Kind::Corrupt, path + ": quick_check: " + std::string(q.text(0)));
    }
    m.schemaVersion = static_cast<int>(db.queryInt("PRAGMA user_version"));
    Transaction snapshot(db, false);  // one consistent read snapshot
    Loader(db, m, opts, progress).load();
  } catch (const SqliteError& e) {
    throw RunFileError(Kind::Corrupt, std::string(e.what()) + " (corrupt or truncated run file)");
  }
  if (opts.applyClockOffsets) applyClockOffsets(m);
  sortActions(m.plan);
  sortActions(m.actions);
  sortTransfers(m);
  m.pairs = model::pairTransfers(m.transfers);  // one pass: the transfers are in its order
  sortRest(m);
  computeTimeRange(m);
  if (progress) progress(1.0f);
  return m;
}

std::vector<uint8_t> loadTransferPayload(const std::string& path, int64_t transferId) {
  Db db = openStagescopeFile(path, false);
  try {
    Stmt s = db.prepare("SELECT payload FROM transfers WHERE id = ?");
    s.bind(1, transferId);
    if (!s.step()) return {};
    auto b = s.blob(0);
    return {b.begin(), b.end()};
  } catch (const SqliteError& e) {
    throw RunFileError(Kind::Corrupt, std::string(e.what()) + " (corrupt or truncated run file)");
  }
}

}  // namespace stagescope::storage
