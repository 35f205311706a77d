#include "embedscope/sessions/store/snapshot_copy.h"

#include <sqlite3.h>

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "store/read_only_open.h"

namespace embedscope::sessions {

namespace {
struct Db {
  sqlite3* db = nullptr;
  ~Db() { sqlite3_close(db); }
};
}  // namespace

void copy_session_snapshot(const std::string& source, const std::string& target) {
  Db src;
  src.db = detail::open_session_read_only(source, 10000);
  std::remove(target.c_str());
  for (const char* tail : {"-wal", "-shm", "-journal"}) std::remove((target + tail).c_str());
  Db dst;
  auto fail = [&](const std::string& what) {
    const std::string detail = dst.db ? sqlite3_errmsg(dst.db) : "out of memory";
    throw SessionError(fmt::format("{}: {} while {} a snapshot of {}", target, detail, what, source));
  };
  if (sqlite3_open_v2(target.c_str(), &dst.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    fail("creating");
  sqlite3_busy_timeout(dst.db, 10000);
  sqlite3_backup* backup = sqlite3_backup_init(dst.db, "main", src.db, "main");
  if (!backup) fail("starting");
  const int rc = sqlite3_backup_step(backup, -1);  // every page, in one read transaction of the source
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) {
    const int primary = rc & 0xff;
    if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT)
      throw SessionError(fmt::format("{}: not a readable session ({}) while copying a snapshot", source,
                                     sqlite3_errstr(rc)));
    throw SessionError(fmt::format("{}: {} while copying a snapshot into {}", source, sqlite3_errstr(rc), target));
  }
  // the copied header says WAL where the source was in WAL mode: one file, as a closed session
  if (sqlite3_exec(dst.db, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr) != SQLITE_OK) fail("finishing");
  const std::string sql = fmt::format("DELETE FROM metadata WHERE key IN ('{}', '{}')", meta::kWriterPid,
                                      meta::kWriterHost);
  if (sqlite3_exec(dst.db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail("finishing");
}

}  // namespace embedscope::sessions
