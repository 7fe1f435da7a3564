// bench_read_floor FILE: the least any reader of a run file pays SQLite to decode its timeline
// tables.  Steps through every row of the stored tables the loader reads (plan, actions,
// transfers, gradients; docs/run-file.md) in rowid order and takes every column's value
// once, with no check, no record built and no allocation of ours.  Prints rows, thread CPU
// seconds and rows per CPU-second per table: the floor that `check`, `compare` and the viewer
// stand on (their load does this plus validation and building the model).  Not a test.
#include <sqlite3.h>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

namespace {

double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Every column of every row of `table`, each value taken once as its stored type.
// Returns the rows read, or -1 (with the reason on stderr) when the table cannot be read.
int64_t decodeAll(sqlite3* db, const std::string& table, uint64_t* sink) {
  sqlite3_stmt* s = nullptr;
  const std::string sql = "SELECT * FROM " + table + " ORDER BY rowid";
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "bench_read_floor: %s: %s\n", table.c_str(), sqlite3_errmsg(db));
    return -1;
  }
  int64_t rows = 0;
  const int n = sqlite3_column_count(s);
  while (sqlite3_step(s) == SQLITE_ROW) {
    for (int c = 0; c < n; ++c) {
      // One statement call per column, then the value's own accessors (cheap): the least the
      // API allows, and what the reader does (storage/Sqlite.h Stmt::value).
      sqlite3_value* v = sqlite3_column_value(s, c);
      switch (sqlite3_value_type(v)) {
        case SQLITE_INTEGER:
          *sink += static_cast<uint64_t>(sqlite3_value_int64(v));
          break;
        case SQLITE_FLOAT:
          *sink += static_cast<uint64_t>(sqlite3_value_double(v));
          break;
        case SQLITE_BLOB:
        case SQLITE_TEXT:
          *sink += static_cast<uint64_t>(sqlite3_value_bytes(v));
          break;
        default:
          break;
      }
    }
    ++rows;
  }
  sqlite3_finalize(s);
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_read_floor RUN_FILE\n");
    return 2;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    std::fprintf(stderr, "bench_read_floor: %s: %s\n", argv[1], db ? sqlite3_errmsg(db) : "?");
    sqlite3_close(db);
    return 1;
  }
  uint64_t sink = 0;
  double total = 0;
  int64_t totalRows = 0;
  std::printf("| table | rows | CPU s | rows per CPU-s |\n|---|---|---|---|\n");
  for (const char* table : {"plan_rows", "actions_rows", "transfers_rows", "gradients_rows"}) {
    const double t0 = threadCpuSeconds();
    const int64_t rows = decodeAll(db, table, &sink);
    const double cpu = threadCpuSeconds() - t0;
    if (rows < 0) continue;
    total += cpu;
    totalRows += rows;
    std::printf("| %s | %lld | %.2f | %.2f M |\n", table, static_cast<long long>(rows), cpu,
                cpu > 0 ? static_cast<double>(rows) / cpu * 1e-6 : 0.0);
  }
  std::printf("| all | %lld | %.2f | %.2f M |\n", static_cast<long long>(totalRows), total,
              total > 0 ? static_cast<double>(totalRows) / total * 1e-6 : 0.0);
  std::fprintf(stderr, "(checksum of the values read: %llu)\n",
               static_cast<unsigned long long>(sink));
  sqlite3_close(db);
  return 0;
}
