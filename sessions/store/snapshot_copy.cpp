#include "embedscope/sessions/store/snapshot_copy.h"

#include <sqlite3.h>

#include <algorithm>
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

void remove_copy(const std::string& target) {
  std::remove(target.c_str());
  for (const char* tail : {"-wal", "-shm", "-journal"}) std::remove((target + tail).c_str());
}

// Removes the target (closed first) unless the copy was kept: a cancelled or failed copy leaves
// no half file.
struct Target {
  const std::string& path;
  Db& dst;
  bool keep = false;
  ~Target() {
    if (keep) return;
    sqlite3_close(dst.db);
    dst.db = nullptr;
    remove_copy(path);
  }
};
}  // namespace

bool copy_session_snapshot(const std::string& source, const std::string& target, const SnapshotProgress& progress,
                           int pages_per_step) {
  Db src;
  src.db = detail::open_session_read_only(source, 10000);
  // one read transaction over every backup step: the snapshot of this instant, whatever the
  // writer commits meanwhile (sqlite3_backup_step uses an open read transaction of the source
  // and restarts only where it opens one of its own)
  if (sqlite3_exec(src.db, "BEGIN; SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) != SQLITE_OK) {
    const int rc = sqlite3_extended_errcode(src.db);
    if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT)
      throw SessionError(fmt::format("{}: not a readable session ({}) while copying a snapshot", source, sqlite3_errstr(rc)));
    throw SessionError(fmt::format("{}: {} while copying a snapshot into {}", source, sqlite3_errmsg(src.db), target));
  }
  remove_copy(target);
  Db dst;
  Target guard{target, dst};
  auto fail = [&](const std::string& what) {
    const std::string detail = dst.db ? sqlite3_errmsg(dst.db) : "out of memory";
    throw SessionError(fmt::format("{}: {} while {} a snapshot of {}", target, detail, what, source));
  };
  if (sqlite3_open_v2(target.c_str(), &dst.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    fail("creating");
  sqlite3_busy_timeout(dst.db, 10000);
  sqlite3_backup* backup = sqlite3_backup_init(dst.db, "main", src.db, "main");
  if (!backup) fail("starting");
  const int step = progress ? std::max(1, pages_per_step) : -1;  // -1: every page at once
  int rc = SQLITE_OK;
  bool cancelled = false;
  while (rc == SQLITE_OK) {
    rc = sqlite3_backup_step(backup, step);
    if (progress && (rc == SQLITE_OK || rc == SQLITE_DONE)) {
      const int64_t total = sqlite3_backup_pagecount(backup);
      if (!progress(total - sqlite3_backup_remaining(backup), total)) {
        cancelled = true;
        break;
      }
    }
  }
  sqlite3_backup_finish(backup);
  if (cancelled) return false;  // the guard removes what was copied
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
  guard.keep = true;
  return true;
}

}  // namespace embedscope::sessions
