// Stmt's column reads (storage/Sqlite.h) fetch each column's value once per row and read its
// type and contents from it.  They must answer exactly what the sqlite3_column_* calls answer,
// row after row: each row's own values (never a remembered one from the row before, also when
// the rows come from different parts of a compound SELECT), SQLite's conversions between
// types, and a NULL value for a column that does not exist.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace {

// One row's columns as the sqlite3_column_* calls see them.
struct Direct {
  int type;
  int64_t i64;
  int32_t i32;
  double f64;
  std::string text;
};
Direct direct(sqlite3_stmt* s, int c) {
  Direct d{};
  d.type = sqlite3_column_type(s, c);
  d.i64 = sqlite3_column_int64(s, c);
  d.i32 = sqlite3_column_int(s, c);
  d.f64 = sqlite3_column_double(s, c);
  const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s, c));
  if (t) d.text.assign(t, static_cast<size_t>(sqlite3_column_bytes(s, c)));
  return d;
}

// Reads every row of `sql` twice, through Stmt and through the C API on a second statement,
// asking Stmt for the type first (as the reader does), then the value, then the text.
void expectSameAsSqlite(Db& db, const std::string& sql, int columns, size_t expectedRows) {
  Stmt s = db.prepare(sql);
  sqlite3_stmt* raw = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &raw, nullptr), SQLITE_OK);
  size_t rows = 0;
  while (s.step()) {
    ASSERT_EQ(sqlite3_step(raw), SQLITE_ROW);
    for (int c = 0; c < columns; ++c) {
      SCOPED_TRACE(sql + ": row " + std::to_string(rows) + " column " + std::to_string(c));
      const Direct d = direct(raw, c);
      EXPECT_EQ(s.type(c), d.type);
      EXPECT_EQ(s.isNull(c), d.type == SQLITE_NULL);
      EXPECT_EQ(s.i64(c), d.i64);
      EXPECT_EQ(s.i32(c), d.i32);
      EXPECT_DOUBLE_EQ(s.f64(c), d.f64);
      EXPECT_EQ(std::string(s.text(c)), d.text);
      EXPECT_EQ(s.type(c), sqlite3_column_type(raw, c));  // after the text conversion too
    }
    ++rows;
  }
  EXPECT_EQ(sqlite3_step(raw), SQLITE_DONE);
  sqlite3_finalize(raw);
  EXPECT_EQ(rows, expectedRows);
}

TEST(Statement, ColumnReadsAnswerWhatSqliteAnswersOnEveryRow) {
  Db db(":memory:", Db::Mode::Create);
  db.exec(
      "CREATE TABLE t (a, b, c);"
      "INSERT INTO t VALUES (1, 2.5, 'x'), ('17', NULL, 3), (NULL, 'NaN', x'4142'),"
      " (9223372036854775807, -0.0, 4.75), (2147483648, 1e300, '');");
  expectSameAsSqlite(db, "SELECT a, b, c FROM t ORDER BY rowid", 3, 5);
  // Each arm of a compound SELECT writes its row to its own registers: a value remembered
  // from the row before would be the other arm's.
  expectSameAsSqlite(db,
                     "SELECT 1, 'one' UNION ALL SELECT 2.5, NULL UNION ALL SELECT NULL, 3 "
                     "UNION ALL SELECT a, c FROM t",
                     2, 8);
}

TEST(Statement, ResetAndRebindReadTheNewRow) {
  Db db(":memory:", Db::Mode::Create);
  db.exec("CREATE TABLE t (k INTEGER, v); INSERT INTO t VALUES (1, 'first'), (2, 22);");
  Stmt s = db.prepare("SELECT v FROM t WHERE k = ?1");
  s.bind(1, int64_t{1});
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.type(0), SQLITE_TEXT);
  EXPECT_EQ(s.text(0), "first");
  s.reset();
  s.bind(1, int64_t{2});
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.type(0), SQLITE_INTEGER);
  EXPECT_EQ(s.i64(0), 22);
  EXPECT_FALSE(s.step());
}

// A statement SQLite prepares again (the schema changed between two runs of it) has new
// registers: the row read after that is read from them.
TEST(Statement, AStatementPreparedAgainReadsItsNewRow) {
  Db db(":memory:", Db::Mode::Create);
  db.exec("CREATE TABLE t (a, b); INSERT INTO t VALUES (1, 'old');");
  Stmt s = db.prepare("SELECT * FROM t ORDER BY rowid DESC");
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.i64(0), 1);
  EXPECT_EQ(s.text(1), "old");
  s.reset();
  db.exec(
      "CREATE TABLE u (x, y, z); INSERT INTO u VALUES (0, 0, 0); DROP TABLE t;"
      "CREATE TABLE t (c, a, b); INSERT INTO t VALUES ('new c', 2, 'new');");
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.type(0), SQLITE_TEXT);
  EXPECT_EQ(s.text(0), "new c");
  EXPECT_EQ(s.i64(1), 2);
  EXPECT_EQ(s.text(1), "2");
  EXPECT_EQ(s.text(2), "new");  // a column the statement did not have when first prepared
}

TEST(Statement, AColumnThatDoesNotExistReadsAsNull) {
  Db db(":memory:", Db::Mode::Create);
  Stmt s = db.prepare("SELECT 5");
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.i64(0), 5);
  for (int c : {-1, 1, 7}) {
    EXPECT_TRUE(s.isNull(c)) << c;
    EXPECT_EQ(s.i64(c), 0) << c;
    EXPECT_EQ(s.text(c), "") << c;
  }
}

}  // namespace
}  // namespace stagescope::storage::test
