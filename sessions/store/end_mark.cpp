#include "embedscope/sessions/store/end_mark.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "store/writer_lock.h"

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

bool checkpoint_abandoned_session(const std::string& path, std::string* why) {
  auto no = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  std::error_code ec;
  const auto wal = std::filesystem::file_size(path + "-wal", ec);
  if (ec || wal == 0) return no("no -wal file to checkpoint");
  if (!detail::live_writer(path).empty()) return no("its writer is alive");
  std::string ended, host;
  try {
    const SessionReader r(path);
    ended = r.meta(meta::kEnded);
    host = r.meta(meta::kWriterHost);
  } catch (const std::exception&) {
    return no("not a readable session");
  }
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  if (ended != "running") return no("its writer closed it");
  if (host != name) return no("its writer ran on another host");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return no("cannot be opened");
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return no("a writer holds it");
  }
  sqlite3* db = nullptr;
  bool ok = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK;
  if (ok) {
    sqlite3_busy_timeout(db, 500);
    ok = sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr) == SQLITE_OK &&
         sqlite3_exec(db, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  sqlite3_close(db);  // before the descriptor: closing it drops this process's POSIX locks
  ::close(fd);
  return ok ? true : no("a reader has it open");
}

}  // namespace embedscope::sessions
