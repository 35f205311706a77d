#include "embedscope/sessions/store/end_mark.h"

#include <sqlite3.h>

#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::sessions {

bool mark_session_ended(const std::string& path, const std::string& ended, const std::string& message, int busy_ms) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return false;
  }
  sqlite3_busy_timeout(db, busy_ms);
  bool ok = sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_stmt* st = nullptr;
  if (ok) ok = sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO metadata VALUES (?1, ?2)", -1, &st, nullptr) == SQLITE_OK;
  for (const auto& [k, v] : {std::pair<const char*, const std::string*>{meta::kEnded, &ended}, {meta::kEndMessage, &message}}) {
    if (!ok) break;
    sqlite3_bind_text(st, 1, k, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, v->c_str(), static_cast<int>(v->size()), SQLITE_TRANSIENT);
    ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  ok = ok && sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
  if (!ok) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return ok;
}

}  // namespace embedscope::sessions
