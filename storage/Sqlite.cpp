#include "storage/Sqlite.h"

#include <sys/resource.h>

#include <algorithm>
#include <utility>

namespace stagescope::storage {

namespace {

// What an I/O error may owe to the process's file-size limit (`ulimit -f`, RLIMIT_FSIZE): a
// write past it fails (EFBIG) and SQLite says only "disk I/O error".  "" when no limit is set
// or the error is another one.
std::string fileSizeLimitHint(int rc) {
  if ((rc & 0xff) != SQLITE_IOERR && (rc & 0xff) != SQLITE_FULL) return "";
  rlimit lim{};
  if (getrlimit(RLIMIT_FSIZE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return "";
  return " (this process's file-size limit, ulimit -f, is " + std::to_string(lim.rlim_cur) +
         " bytes: raise it, or record less)";
}

}  // namespace

// ---- Stmt ------------------------------------------------------------------------------------

Stmt::Stmt(Db& db, std::string_view sql) : db_(&db) {
  int rc = sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &s_, nullptr);
  if (rc != SQLITE_OK) db.fail(rc, "prepare \"" + std::string(sql.substr(0, 80)) + "\"");
  row_.assign(static_cast<size_t>(std::max(0, sqlite3_column_count(s_))), nullptr);
}

Stmt::Stmt(Stmt&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      s_(std::exchange(other.s_, nullptr)),
      row_(std::move(other.row_)),
      fetched_(std::exchange(other.fetched_, false)) {
  other.row_.clear();
}

Stmt& Stmt::operator=(Stmt&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(s_);
    db_ = std::exchange(other.db_, nullptr);
    s_ = std::exchange(other.s_, nullptr);
    row_ = std::move(other.row_);
    other.row_.clear();
    fetched_ = std::exchange(other.fetched_, false);
  }
  return *this;
}

Stmt::~Stmt() {
  sqlite3_finalize(s_);
}

void Stmt::fail(int rc, const char* what) const {
  std::string sql = s_ ? sqlite3_sql(s_) : "";
  if (sql.size() > 80) sql.resize(80);
  // Read the message before reset() (which leaves the statement reusable) can change it.
  const std::string path = db_ ? db_->path() : std::string("?");
  const char* msg = db_ && db_->handle() ? sqlite3_errmsg(db_->handle()) : sqlite3_errstr(rc);
  SqliteError error(rc & 0xff,
                    path + ": " + what + " \"" + sql + "\": " + msg + fileSizeLimitHint(rc));
  sqlite3_reset(s_);
  throw error;
}

// ---- Db --------------------------------------------------------------------------------------

Db::Db(const std::string& path, Mode mode) : path_(path) {
  int flags = SQLITE_OPEN_NOMUTEX;  // one connection per thread: no per-call mutex
  switch (mode) {
    case Mode::ReadOnly:
      flags |= SQLITE_OPEN_READONLY;
      break;
    case Mode::ReadWrite:
      flags |= SQLITE_OPEN_READWRITE;
      break;
    case Mode::Create:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
  }
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw SqliteError(rc, path + ": open: " + msg);
  }
  sqlite3_extended_result_codes(db_, 0);
}

Db::Db(Db&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

Db::~Db() {
  close();
}

void Db::close() {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

void Db::fail(int rc, const std::string& what) const {
  const char* msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  throw SqliteError(rc & 0xff, path_ + ": " + what + ": " + msg + fileSizeLimitHint(rc));
}

void Db::exec(const std::string& sql) {
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(rc, "exec \"" + sql.substr(0, 80) + "\"");
}

int64_t Db::queryInt(const std::string& sql) {
  Stmt s(*this, sql);
  return s.step() ? s.i64(0) : 0;
}

bool Db::hasTable(const std::string& name) {
  Stmt s(*this, "SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?");
  s.bindText(1, name);
  return s.step();
}

// ---- Transaction -----------------------------------------------------------------------------

Transaction::Transaction(Db& db, bool immediate) : db_(db) {
  db_.exec(immediate ? "BEGIN IMMEDIATE" : "BEGIN");
}

Transaction::~Transaction() {
  if (open_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

}  // namespace stagescope::storage
