#include "embedscope/sessions/store/op_stream.h"

#include <sqlite3.h>

#include <fmt/format.h>

#include "store/op_scan.h"

namespace embedscope::sessions {

void for_each_lane_ops(const SessionReader& session, const std::function<void(std::vector<OpRecord>& lane_ops)>& fn) {
  const std::string& path = session.path();
  sqlite3* db = nullptr;
  struct Close {
    sqlite3*& db;
    ~Close() { sqlite3_close(db); }
  } close{db};
  const std::string uri = "file:" + path + "?mode=ro";
  if (sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK)
    throw SessionError(fmt::format("{}: cannot open: {}", path, db ? sqlite3_errmsg(db) : "out of memory"));
  // as SessionReader: no checkpoint on close, wait while a writer holds a lock for a moment
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  sqlite3_busy_timeout(db, 10000);
  detail::scan_lanes(db, path, session.has_op_blocks(), fn);
}

}  // namespace embedscope::sessions
