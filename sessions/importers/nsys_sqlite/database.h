#pragma once
// A read-only SQLite database of an Nsight Systems export: opened from a file
// (SQLITE_OPEN_READONLY) or from bytes in memory (sqlite3_deserialize, read-only), with the
// tables and columns it has, and rows read by a callback. Every SQLite failure throws
// ImportError naming the file and SQLite's message.

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>

namespace embedscope::sessions::importers::nsys {

/// One result row; columns by index. NULL reads as `fallback` (integers) or "" (text).
class Row {
 public:
  explicit Row(sqlite3_stmt* s) : s_(s) {}
  bool null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  /// SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB or SQLITE_NULL: what the cell holds
  /// (a time stored as text reads 0 through i(): tester46 F2).
  int type(int col) const { return sqlite3_column_type(s_, col); }
  int64_t i(int col, int64_t fallback = 0) const { return null(col) ? fallback : sqlite3_column_int64(s_, col); }
  std::string text(int col) const;

 private:
  sqlite3_stmt* s_;
};

class Database {
 public:
  /// Opens `path` read-only; `name` stands for it in messages ("" = the path). Throws
  /// ImportError ("PATH: cannot open as SQLite (read-only): ...").
  static Database open_file(const std::string& path, const std::string& name = "");
  /// Reads `bytes` (a whole database file) in place, read-only; `name` is used in messages.
  static Database open_buffer(std::string_view bytes, const std::string& name);
  Database(Database&& o) noexcept : db_(o.db_), name_(std::move(o.name_)), columns_(std::move(o.columns_)) { o.db_ = nullptr; }
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  const std::string& name() const { return name_; }
  bool has_table(const std::string& table) const { return columns_.count(table) > 0; }
  /// The column names of `table` (empty when it is absent).
  const std::set<std::string>& columns(const std::string& table) const;
  bool has_column(const std::string& table, const std::string& column) const { return columns(table).count(column) > 0; }
  /// Runs `sql` and calls `row` for each result row. Throws ImportError naming the file, the
  /// statement's first words and SQLite's message.
  void each(const std::string& sql, const std::function<void(const Row&)>& row) const;
  /// The first column of the first row of `sql` as an integer (`fallback` when no row or NULL).
  int64_t scalar(const std::string& sql, int64_t fallback = 0) const;

 private:
  Database(sqlite3* db, std::string name);
  void load_schema();
  [[noreturn]] void fail(const std::string& what) const;

  sqlite3* db_ = nullptr;
  std::string name_;
  std::map<std::string, std::set<std::string>> columns_;
};

}  // namespace embedscope::sessions::importers::nsys
