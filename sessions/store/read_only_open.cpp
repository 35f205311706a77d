#include "store/read_only_open.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "embedscope/sessions/store/session.h"
#include "store/held_files.h"

namespace embedscope::sessions::detail {

void refuse_cut_short(const std::string& path) {
  // a sibling's size, -1 where there is none
  auto beside = [&](const char* suffix) -> int64_t {
    struct stat sb {};
    return ::stat((path + suffix).c_str(), &sb) == 0 ? static_cast<int64_t>(sb.st_size) : -1;
  };
  // A hot journal (one with content: its header and the pages it saved) may roll the file back to
  // its size before the transaction; an empty one (0 bytes) is not hot (SQLite, "Atomic Commit",
  // 4.2) and restores nothing.
  if (beside("-journal") > 0) return;
  const int64_t wal_before = beside("-wal");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // SQLite says why
  unsigned char h[100] = {};
  const ssize_t n = ::pread(fd, h, sizeof(h), 0);
  struct stat sb {};
  const bool have_stat = ::fstat(fd, &sb) == 0;
  close_keeping_locks(fd);  // a writer of this process keeps its SQLite locks (held_files.h)
  static constexpr char kMagic[] = "SQLite format 3";  // 16 bytes with its NUL
  if (n != static_cast<ssize_t>(sizeof(h)) || !have_stat || std::memcmp(h, kMagic, sizeof(kMagic)) != 0) return;
  auto be32 = [&](int at) {
    return (uint32_t{h[at]} << 24) | (uint32_t{h[at + 1]} << 16) | (uint32_t{h[at + 2]} << 8) | uint32_t{h[at + 3]};
  };
  uint32_t page_size = (uint32_t{h[16]} << 8) | h[17];
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || (page_size & (page_size - 1)) != 0) return;  // not a page size: SQLite says corrupt
  // A -wal holding a whole frame (its 32-byte header, a 24-byte frame header and a page: SQLite,
  // "WAL File Format") may hold the pages the file lacks (a killed run: its commits are there, the
  // file grows at the checkpoint; a live run whose checkpoint is growing the file); a shorter one
  // (0 bytes: an interrupted copy; a header alone) holds no page.
  const int64_t whole_frame = 32 + 24 + int64_t{page_size};
  if (wal_before >= whole_frame) return;
  const uint32_t pages = be32(28);
  if (pages == 0 || be32(24) != be32(92)) return;  // the count is not valid: SQLite takes the file's size
  const auto want = static_cast<int64_t>(pages) * page_size;
  if (sb.st_size >= want) return;
  if (beside("-wal") >= whole_frame) return;  // a writer committed since: its checkpoint grows the file
  throw SessionError(fmt::format("{}: the session file is truncated or corrupt ({} bytes, where its SQLite header says {} "
                                 "pages of {} bytes: {} bytes; an interrupted copy? copy it again)",
                                 path, sb.st_size, pages, page_size, want));
}

namespace {

// An empty `path`-shm where none exists, with the database file's mode (and, as root, owner) as
// SQLite gives it (os_unix.c unixOpenSharedMemory). Made under a private name and linked into
// place with its descriptor already closed: closing a descriptor of a file drops every POSIX lock
// this process holds on it, SQLite's included, so no descriptor of the -shm is ever closed here.
// Where the file system has no hard links, created in place (O_EXCL) and closed at once. Best
// effort: SQLite says what it cannot open.
void ro_make_empty_shm(const std::string& path) {
  const std::string shm = path + "-shm";
  struct stat db {}, sb {};
  if (::stat(path.c_str(), &db) != 0 || ::lstat(shm.c_str(), &sb) == 0) return;
  const mode_t mode = db.st_mode & 0777;
  static std::atomic<int> counter{0};
  const std::string tmp = fmt::format("{}.mk-{}-{}", shm, getpid(), counter++);
  auto make = [&](const std::string& name) {
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) return false;
    if (geteuid() == 0) (void)fchown(fd, db.st_uid, db.st_gid);
    ::close(fd);
    return true;
  };
  if (!make(tmp)) return;
  const int linked = ::link(tmp.c_str(), shm.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && link_errno != EEXIST) make(shm);  // no hard links here (EPERM, ENOTSUP)
}

// The first read of a connection (the schema cookie: a read transaction, so the -wal and the
// wal-index are opened); its extended result code.
int ro_first_read(sqlite3* db) {
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db, "PRAGMA schema_version", -1, &st, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
  else rc = sqlite3_extended_errcode(db);
  sqlite3_finalize(st);
  return rc;
}

// Opens `uri`; null (with SQLite's reason in `error`) where SQLite cannot.
sqlite3* ro_open_uri(const std::string& uri, int busy_timeout_ms, std::string& error) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    error = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return nullptr;
  }
  // a reader never writes: no checkpoint when this connection closes (as the last connection of
  // a WAL file SQLite would copy the WAL into the database), and a wait, rather than an error,
  // while the writer holds a lock for a moment (its first commit, its final checkpoint and
  // change of journal mode)
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return db;
}

}  // namespace

std::string sqlite_file_uri(const std::string& path, const std::string& query) {
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '%') uri += "%25";
    else if (c == '?') uri += "%3f";
    else if (c == '#') uri += "%23";
    else uri += c;
  }
  return uri + "?" + query;
}

bool is_wal_index_failure(int rc) {
  switch (rc) {
    case SQLITE_IOERR_SHMOPEN:
    case SQLITE_IOERR_SHMSIZE:
    case SQLITE_IOERR_SHMMAP:
    case SQLITE_IOERR_SHMLOCK:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY_CANTINIT:
      return true;
    default:
      return false;
  }
}

sqlite3* open_session_read_only(const std::string& path, int busy_timeout_ms) {
  const std::string plain = sqlite_file_uri(path, "mode=ro");
  std::string error;
  sqlite3* db = ro_open_uri(plain, busy_timeout_ms, error);
  // the system's reason where there is one ("Permission denied", not SQLite's "unable to open database file")
  if (!db && ::access(path.c_str(), R_OK) != 0) throw SessionError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  if (!db) throw SessionError(fmt::format("{}: cannot open: {}", path, error));
  if (!is_wal_index_failure(ro_first_read(db))) return db;
  // closed first: the connections of one process share one wal-index per file (os_unix.c), and
  // the next must open it anew, read-only
  sqlite3_close(db);
  ro_make_empty_shm(path);
  if (sqlite3* shared = ro_open_uri(sqlite_file_uri(path, "mode=ro&readonly_shm=1"), busy_timeout_ms, error)) {
    if (ro_first_read(shared) == SQLITE_OK) return shared;
    sqlite3_close(shared);
  }
  // a killed run's FILE and FILE-wal copied without FILE-shm into a folder this process may not
  // write (read-only CI artifacts): SQLite needs the -shm to read the -wal, and immutable=1 would
  // read the file without the -wal's commits (https://www.sqlite.org/wal.html, "Read-Only
  // Databases"): refused, saying what to do, rather than read without the steps in the -wal
  struct stat wal {}, shm {};
  const std::string folder = std::filesystem::path(path).parent_path().string();
  if (::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0 && ::lstat((path + "-shm").c_str(), &shm) != 0 &&
      ::access(folder.empty() ? "." : folder.c_str(), W_OK) != 0)
    throw SessionError(fmt::format(
        "{}: cannot be read here: its commits are in {}-wal, and SQLite needs a {}-shm beside them to read them, "
        "which it cannot create in a read-only folder; copy {} and {}-wal together to a writable folder and read "
        "the copy (or copy the {}-shm the run left as well)",
        path, path, path, path, path, path));
  // no way round it: as SQLite opens it, its first query says why
  db = ro_open_uri(plain, busy_timeout_ms, error);
  if (!db) throw SessionError(fmt::format("{}: cannot open: {}", path, error));
  return db;
}

}  // namespace embedscope::sessions::detail
