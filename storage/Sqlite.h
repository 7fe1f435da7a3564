// A small RAII wrapper over the SQLite C API: Db (one connection), Stmt (one prepared
// statement), Transaction (BEGIN … COMMIT, rolled back when left without commit()).
//
// Why our own wrapper instead of a library: the hot paths of the writer and the reader are
// prepare-once / bind / step / reset and column reads; these are inline here and add nothing
// beyond a return-code check.  Every error throws SqliteError naming the database file and
// carrying sqlite3_errmsg.
//
// Threading: a Db and its Stmts belong to one thread at a time (one connection per thread).
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace stagescope::storage {

// An SQLite failure.  what() = "<file>: <context>: <sqlite3_errmsg>".
class SqliteError : public std::runtime_error {
 public:
  SqliteError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }  // primary result code (SQLITE_CORRUPT, SQLITE_NOTADB, ...)

 private:
  int code_;
};

class Db;

class Stmt {
 public:
  Stmt() = default;
  Stmt(Db& db, std::string_view sql);
  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&& other) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  // Binding; indices start at 1.  Text/blob overloads ending in "Static" do not copy: the
  // bytes must stay alive and unchanged until the statement is stepped and reset.
  void bind(int i, int64_t v) { check(sqlite3_bind_int64(s_, i, v), "bind"); }
  void bind(int i, int32_t v) { check(sqlite3_bind_int(s_, i, v), "bind"); }
  void bind(int i, double v) { check(sqlite3_bind_double(s_, i, v), "bind"); }
  void bindNull(int i) { check(sqlite3_bind_null(s_, i), "bind"); }
  void bindText(int i, std::string_view v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT), "bind");
  }
  void bindTextStatic(int i, std::string_view v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC), "bind");
  }
  void bindBlobStatic(int i, const void* data, size_t n) {
    check(sqlite3_bind_blob64(s_, i, data, n, SQLITE_STATIC), "bind");
  }

  // Steps once: true when a row is available, false when done.  Throws on error.
  bool step() {
    forgetRow();
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(rc, "step");
  }
  // Steps a statement that returns no rows, then resets it.
  void run() {
    step();
    reset();
  }
  void reset() {  // errors were already reported by step()
    forgetRow();
    sqlite3_reset(s_);
  }
  void clearBindings() { sqlite3_clear_bindings(s_); }

  // Columns of the current row; indices start at 0.  The same values and conversions as
  // sqlite3_column_type/int64/int/double/text/blob/bytes, read from the column's value, which
  // is fetched from the statement once per row (value()): the reader asks up to three things
  // of a column (its type, its value, NULL or not) on millions of rows, and every
  // sqlite3_column_* call repeats the statement's column lookup and error bookkeeping.
  int type(int c) const { return sqlite3_value_type(value(c)); }  // SQLITE_INTEGER, ...
  bool isNull(int c) const { return type(c) == SQLITE_NULL; }
  int64_t i64(int c) const { return sqlite3_value_int64(value(c)); }
  int32_t i32(int c) const { return sqlite3_value_int(value(c)); }
  double f64(int c) const { return sqlite3_value_double(value(c)); }
  std::string_view text(int c) const {
    sqlite3_value* v = value(c);
    auto* p = reinterpret_cast<const char*>(sqlite3_value_text(v));
    return p ? std::string_view(p, static_cast<size_t>(sqlite3_value_bytes(v)))
             : std::string_view();
  }
  std::span<const uint8_t> blob(int c) const {
    sqlite3_value* v = value(c);
    auto* p = static_cast<const uint8_t*>(sqlite3_value_blob(v));
    return p ? std::span<const uint8_t>(p, static_cast<size_t>(sqlite3_value_bytes(v)))
             : std::span<const uint8_t>();
  }
  // Column c of the current row (sqlite3_column_value), valid until the next step or reset.
  // Only this statement's thread may read it (one connection per thread, above).
  sqlite3_value* value(int c) const {
    // Out of range: SQLite's own answer (a NULL value, SQLITE_RANGE), never remembered.
    if (static_cast<size_t>(c) >= row_.size()) return sqlite3_column_value(s_, c);
    sqlite3_value*& v = row_[static_cast<size_t>(c)];
    if (!v) {
      v = sqlite3_column_value(s_, c);
      fetched_ = true;
    }
    return v;
  }

  sqlite3_stmt* handle() const { return s_; }

 private:
  void check(int rc, const char* what) {
    if (rc != SQLITE_OK) fail(rc, what);
  }
  [[noreturn]] void fail(int rc, const char* what) const;
  void forgetRow() {
    if (fetched_) std::fill(row_.begin(), row_.end(), nullptr);
    fetched_ = false;
  }

  Db* db_ = nullptr;
  sqlite3_stmt* s_ = nullptr;
  // The current row's columns fetched so far ([c]: nullptr until value(c); sized to the
  // statement's columns when prepared); fetched_: any.
  mutable std::vector<sqlite3_value*> row_;
  mutable bool fetched_ = false;
};

class Db {
 public:
  enum class Mode { ReadOnly, ReadWrite, Create };

  Db() = default;
  Db(const std::string& path, Mode mode);
  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  // Runs one or more statements without results.
  void exec(const std::string& sql);
  Stmt prepare(std::string_view sql) { return Stmt(*this, sql); }
  // The first column of the first row of `sql` as an integer (0 when no row).
  int64_t queryInt(const std::string& sql);
  bool hasTable(const std::string& name);

  int64_t changes() const { return sqlite3_changes64(db_); }
  void setBusyTimeout(int ms) { sqlite3_busy_timeout(db_, ms); }
  void close();

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  // Throws SqliteError "<path>: <what>: <errmsg>" for result code `rc`.
  [[noreturn]] void fail(int rc, const std::string& what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// BEGIN [IMMEDIATE] … COMMIT; the destructor rolls back when commit() was not reached.
class Transaction {
 public:
  explicit Transaction(Db& db, bool immediate = true);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Db& db_;
  bool open_ = true;
};

}  // namespace stagescope::storage
