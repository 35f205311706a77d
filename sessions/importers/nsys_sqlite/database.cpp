#include "importers/nsys_sqlite/database.h"

#include <fmt/format.h>

#include "embedscope/sessions/importers/importer.h"

namespace embedscope::sessions::importers::nsys {

std::string Row::text(int col) const {
  const unsigned char* t = sqlite3_column_text(s_, col);
  if (!t) return "";
  return std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(sqlite3_column_bytes(s_, col)));
}

Database::Database(sqlite3* db, std::string name) : db_(db), name_(std::move(name)) {}

Database::~Database() {
  if (db_) sqlite3_close(db_);
}

Database Database::open_file(const std::string& path, const std::string& name) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if (db) sqlite3_close(db);
    throw ImportError(fmt::format("{}: cannot open as SQLite (read-only): {}", name.empty() ? path : name, msg));
  }
  Database d(db, name.empty() ? path : name);
  d.load_schema();
  return d;
}

Database Database::open_buffer(std::string_view bytes, const std::string& name) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    if (db) sqlite3_close(db);
    throw ImportError(fmt::format("{}: cannot open an in-memory SQLite database", name));
  }
  Database d(db, name);
  // SQLITE_DESERIALIZE_READONLY: SQLite reads the caller's bytes and never writes or frees them.
  auto* data = reinterpret_cast<unsigned char*>(const_cast<char*>(bytes.data()));
  const auto n = static_cast<sqlite3_int64>(bytes.size());
  if (sqlite3_deserialize(db, "main", data, n, n, SQLITE_DESERIALIZE_READONLY) != SQLITE_OK) d.fail("cannot read the bytes as SQLite");
  d.load_schema();
  return d;
}

void Database::fail(const std::string& what) const {
  throw ImportError(fmt::format("{}: {}: SQLite says: {}", name_, what, sqlite3_errmsg(db_)));
}

void Database::load_schema() {
  std::set<std::string> tables;
  each("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')", [&](const Row& r) { tables.insert(r.text(0)); });
  for (const auto& t : tables) {
    auto& cols = columns_[t];
    std::string quoted;
    for (char c : t) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    each(fmt::format("PRAGMA table_info(\"{}\")", quoted), [&](const Row& r) { cols.insert(r.text(1)); });
  }
}

const std::set<std::string>& Database::columns(const std::string& table) const {
  static const std::set<std::string> none;
  auto it = columns_.find(table);
  return it == columns_.end() ? none : it->second;
}

void Database::each(const std::string& sql, const std::function<void(const Row&)>& row) const {
  sqlite3_stmt* st = nullptr;
  const std::string head = sql.substr(0, std::min<size_t>(sql.size(), 60));
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) fail(fmt::format("reading '{}...'", head));
  const Row r(st);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    try {
      row(r);
    } catch (...) {
      sqlite3_finalize(st);
      throw;
    }
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) fail(fmt::format("reading '{}...'", head));
}

int64_t Database::scalar(const std::string& sql, int64_t fallback) const {
  int64_t v = fallback;
  bool first = true;
  each(sql, [&](const Row& r) {
    if (first) v = r.i(0, fallback);
    first = false;
  });
  return v;
}

}  // namespace embedscope::sessions::importers::nsys
