#include "store/op_scan.h"

#include <sqlite3.h>

#include <algorithm>

#include <fmt/format.h>

#include "embedscope/sessions/store/session.h"
#include "store/op_blocks.h"

namespace embedscope::sessions::detail {

namespace {

struct ScanStmt {
  sqlite3_stmt* st = nullptr;
  ~ScanStmt() { sqlite3_finalize(st); }
};

// An SQLite result code as the reader words it (SessionReader::Impl::check): the file named.
void scan_check(sqlite3* db, const std::string& path, int rc, const char* what) {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
  const int primary = rc & 0xff;
  const std::string detail = sqlite3_errmsg(db);
  if (primary == SQLITE_CORRUPT)
    throw SessionError(fmt::format("{}: the session file is truncated or corrupt ({}, while {})", path, detail, what));
  throw SessionError(fmt::format("{}: {} while {}", path, detail, what));
}

void scan_packed(sqlite3* db, const std::string& path, const std::function<void(std::vector<OpRecord>&)>& fn) {
  int64_t expected = -1;
  {
    ScanStmt s;
    scan_check(db, path, sqlite3_prepare_v2(db, "SELECT op_count FROM op_blocks WHERE lane_key = -1", -1, &s.st, nullptr),
               "reading op_blocks");
    int rc = sqlite3_step(s.st);
    if (rc == SQLITE_ROW) expected = sqlite3_column_int64(s.st, 0);
    else scan_check(db, path, rc, "reading op_blocks");
  }
  ScanStmt s;
  scan_check(db, path,
             sqlite3_prepare_v2(db, "SELECT lane_key, op_count, data FROM op_blocks WHERE lane_key <> -1 ORDER BY lane_key, block",
                                -1, &s.st, nullptr),
             "reading op_blocks");
  std::vector<OpRecord> lane;
  int64_t lane_key = 0, total = 0;
  bool any = false;
  auto flush = [&] {
    total += static_cast<int64_t>(lane.size());
    if (!lane.empty()) fn(lane);
    lane.clear();
  };
  int rc;
  while ((rc = sqlite3_step(s.st)) == SQLITE_ROW) {
    const int64_t key = sqlite3_column_int64(s.st, 0);
    if (!any || key != lane_key) {
      if (any) flush();
      lane_key = key;
      any = true;
    }
    const auto rank = static_cast<int32_t>(key >> 8), lane_no = static_cast<int32_t>(key & 255);
    const void* data = sqlite3_column_blob(s.st, 2);
    const int size = sqlite3_column_bytes(s.st, 2);
    const int64_t count = sqlite3_column_int64(s.st, 1);
    try {
      unpack_ops(data, static_cast<size_t>(size), count, rank, lane_no, lane);
    } catch (const BadBlock& e) {
      throw SessionError(
          fmt::format("{}: the session file is corrupt (op_blocks of rank {} lane {}: {})", path, rank, lane_no, e.what()));
    }
  }
  scan_check(db, path, rc, "reading op_blocks");
  if (any) flush();
  if (total != expected)
    throw SessionError(fmt::format(
        "{}: the session file is corrupt (op_blocks hold {} ops, their marker row says {}; delete the op_blocks rows to "
        "read the ops rows)",
        path, total, expected));
}

void scan_rows(sqlite3* db, const std::string& path, const std::function<void(std::vector<OpRecord>&)>& fn) {
  ScanStmt s;
  scan_check(db, path,
             sqlite3_prepare_v2(db, fmt::format("SELECT {} FROM ops ORDER BY lane_key, start_ns", kOpColumns).c_str(), -1,
                                &s.st, nullptr),
             "reading ops");
  std::vector<OpRecord> lane;
  int rc;
  while ((rc = sqlite3_step(s.st)) == SQLITE_ROW) {
    OpRecord o = op_from_row(s.st, path);
    if (!lane.empty() && (o.rank != lane.back().rank || o.lane != lane.back().lane)) {
      fn(lane);
      lane.clear();
    }
    lane.push_back(o);
  }
  scan_check(db, path, rc, "reading ops");
  if (!lane.empty()) fn(lane);
}

}  // namespace

void scan_lanes(sqlite3* db, const std::string& path, bool packed,
                const std::function<void(std::vector<OpRecord>& lane_ops)>& fn) {
  if (packed) scan_packed(db, path, fn);
  else scan_rows(db, path, fn);
}

}  // namespace embedscope::sessions::detail
