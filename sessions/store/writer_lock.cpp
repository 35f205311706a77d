// The session writer's advisory lock and the live-writer check (writer_lock.h).
#include "store/writer_lock.h"
#include "store/held_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "store/read_only_open.h"

namespace embedscope::sessions::detail {

namespace {

std::string this_host() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

bool pid_alive(long pid) { return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

// The pid holding an flock on (dev, ino), from /proc/locks; 0 when not listed. Lines read
// "1: FLOCK  ADVISORY  WRITE 4242 fe:00:11026787 0 EOF" (device major:minor in hex); a waiter
// has "->" after the number. An exact device match wins; some overlay file systems list
// another device than stat() reports, so an inode-only match is the fallback.
long flock_holder(dev_t dev, ino_t ino) {
  std::ifstream f("/proc/locks");
  std::string line;
  long by_inode = 0;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string num, kind, mode, access, where;
    long pid = 0;
    in >> num >> kind;
    if (kind == "->") continue;  // waiting, not holding
    in >> mode >> access >> pid >> where;
    if (kind != "FLOCK" || pid <= 0) continue;
    unsigned maj = 0, min = 0;
    unsigned long long inode = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &maj, &min, &inode) != 3 || inode != ino) continue;
    if (maj == major(dev) && min == minor(dev)) return pid;
    by_inode = pid;
  }
  return by_inode;
}

// metadata ended, writer_pid and writer_host, read-only (no checkpoint on close); empty when
// the file cannot be read as a session.
std::map<std::string, std::string> writer_metadata(const std::string& path) {
  std::map<std::string, std::string> out;
  sqlite3* db = nullptr;
  try {
    db = open_session_read_only(path, 2000);  // read_only_open.h
  } catch (const SessionError&) {
  }
  if (db) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT key, value FROM metadata WHERE key IN (?1, ?2, ?3)", -1, &st, nullptr) ==
        SQLITE_OK) {
      sqlite3_bind_text(st, 1, meta::kEnded, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, 2, meta::kWriterPid, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, 3, meta::kWriterHost, -1, SQLITE_STATIC);
      while (sqlite3_step(st) == SQLITE_ROW) {
        const auto* k = sqlite3_column_text(st, 0);
        const auto* v = sqlite3_column_text(st, 1);
        if (k && v) out[reinterpret_cast<const char*>(k)] = reinterpret_cast<const char*>(v);
      }
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

}  // namespace

int claim_session_file(const std::string& path) {
  // Locked before it has its name: a file created under a private name, locked, then linked to
  // `path` (link fails if `path` exists: the atomic claim), so nobody ever sees the session
  // file unlocked. Where hard links are not supported, O_EXCL on `path` claims it and the lock
  // follows a moment later.
  static std::atomic<int> counter{0};
  const std::string tmp = fmt::format("{}.claim-{}-{}", path, getpid(), counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    (void)flock(fd, LOCK_EX);  // a file nobody else knows: never waits
    const int linked = ::link(tmp.c_str(), path.c_str());
    const int err = errno;
    ::unlink(tmp.c_str());
    if (linked == 0) return fd;
    ::close(fd);
    if (err != EPERM && err != ENOTSUP && err != EOPNOTSUPP && err != EXDEV)
      throw SessionError(fmt::format("{}: cannot create the session file: {}", path, std::strerror(err)));
  }
  fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw SessionError(fmt::format("{}: cannot create the session file: {}", path, std::strerror(errno)));
  // Blocking: live_writer() of another process may hold a shared lock for a moment. A file
  // system without flock (some network mounts) leaves the pid check of live_writer().
  (void)flock(fd, LOCK_EX);
  return fd;
}

WriterLock probe_writer_lock(const std::string& path, long* holder) {
  if (holder) *holder = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return WriterLock::unknown;
  WriterLock out = WriterLock::free;
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
    // EWOULDBLOCK: another open file holds LOCK_EX (a writer, in this process or another);
    // anything else (ENOLCK, EINVAL, EOPNOTSUPP, ENOSYS: a file system without flock, e.g. an
    // NFS mount with `nolock` or without lockd) says nothing about a writer
    if (errno == EWOULDBLOCK) {
      out = WriterLock::held;
      struct stat sb {};
      if (holder && fstat(fd, &sb) == 0) *holder = flock_holder(sb.st_dev, sb.st_ino);
    } else {
      out = WriterLock::unknown;
    }
  }
  if (out == WriterLock::free) (void)flock(fd, LOCK_UN);
  // kept open while a writer of this process has the file (held_files.h: closing it would drop
  // that writer's SQLite locks)
  close_keeping_locks(fd);
  return out;
}

std::string live_writer(const std::string& path) {
  const auto meta = writer_metadata(path);
  auto value = [&](const char* k) {
    auto it = meta.find(k);
    return it == meta.end() ? std::string() : it->second;
  };
  const long meta_pid = std::strtol(value(meta::kWriterPid).c_str(), nullptr, 10);
  long pid = 0;
  switch (probe_writer_lock(path, &pid)) {
    case WriterLock::held:
      if (pid <= 0) pid = meta_pid;
      if (pid > 0) return fmt::format("a run (pid {}) is still writing it", pid);
      return "a run is still writing it (its writer lock is held; pid unknown)";
    case WriterLock::free:
      // every writer holds the lock from claiming the name until it has closed the file: a free
      // lock is a writer that is gone, whatever process now has its pid (retest54 R3: a killed
      // run's pid, reused by another process, kept the session "running" and unreplaceable)
      return "";
    case WriterLock::unknown:
      break;
  }
  // no flock here: the metadata and the pid are all there is
  if (value(meta::kEnded) == "running" && value(meta::kWriterHost) == this_host() && meta_pid != getpid() &&
      pid_alive(meta_pid))
    return fmt::format("a run (pid {}) is still writing it (its metadata says running and the process is alive)",
                       meta_pid);
  return "";
}

}  // namespace embedscope::sessions::detail
