#include "embedscope/sessions/store/end_mark.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "embedscope/sessions/model/units.h"

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "store/held_files.h"
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
  // a session whose header (format, workload, ...) was never committed - a run stopped during its
  // start-up - is not made one by an end mark (retest47 R1: "recorded as cancelled", then
  // "metadata 'format' is ''"): nothing is written, the caller says it could not be recorded
  if (ok) ok = sqlite3_prepare_v2(db, "SELECT 1 FROM metadata WHERE key = ?1", -1, &st, nullptr) == SQLITE_OK;
  if (ok) {
    sqlite3_bind_text(st, 1, meta::kFormat, -1, SQLITE_STATIC);
    ok = sqlite3_step(st) == SQLITE_ROW;
  }
  sqlite3_finalize(st);
  st = nullptr;
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

namespace {

uint32_t wal_be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// SQLite's walChecksumBytes: over pairs of 32-bit words (big- or little-endian), chained from `s`.
void wal_checksum(bool big_endian, const unsigned char* a, size_t n, std::array<uint32_t, 2>& s) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint32_t x0 = big_endian ? wal_be32(a + i)
                                   : (uint32_t{a[i]} | (uint32_t{a[i + 1]} << 8) | (uint32_t{a[i + 2]} << 16) |
                                      (uint32_t{a[i + 3]} << 24));
    const uint32_t x1 = big_endian ? wal_be32(a + i + 4)
                                   : (uint32_t{a[i + 4]} | (uint32_t{a[i + 5]} << 8) | (uint32_t{a[i + 6]} << 16) |
                                      (uint32_t{a[i + 7]} << 24));
    s[0] += x0 + s[1];
    s[1] += x1 + s[0];
  }
}

}  // namespace

WalScan scan_wal(const std::string& path) {
  WalScan out;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path + "-wal", ec);
  if (ec || size == 0) return out;
  std::ifstream in(path + "-wal", std::ios::binary);
  if (!in) return out;
  out.present = true;
  out.file_bytes = static_cast<int64_t>(size);
  std::array<unsigned char, 32> h{};
  const uint32_t magic = in.read(reinterpret_cast<char*>(h.data()), 32) ? wal_be32(h.data()) : 0;
  const bool big = (magic & 1) != 0;
  std::array<uint32_t, 2> sum{0, 0};
  if (magic == 0x377f0682 || magic == 0x377f0683) wal_checksum(big, h.data(), 24, sum);
  uint32_t ps = wal_be32(h.data() + 8);
  if (ps == 1) ps = 65536;
  if ((magic != 0x377f0682 && magic != 0x377f0683) || wal_be32(h.data() + 4) != 3007000 || ps < 512 || ps > 65536 ||
      (ps & (ps - 1)) != 0 || sum[0] != wal_be32(h.data() + 24) || sum[1] != wal_be32(h.data() + 28)) {
    out.unread_bytes = out.file_bytes;
    out.problem = "its header is damaged";
    return out;
  }
  out.page_size = ps;
  out.readable_bytes = 32;
  const int64_t frame = 24 + int64_t{ps};
  std::vector<unsigned char> f(static_cast<size_t>(frame));
  int64_t k = 0, at = 32;
  bool broken = false;  // the checksum chain broke: the frames after it cannot be checked
  int64_t end = 0;  // where this log's bytes end (the file's end, or the first frame of an earlier log)
  for (;; ++k, at += frame) {
    if (!in.read(reinterpret_cast<char*>(f.data()), frame)) {  // end of file: whole, or a frame cut short
      if (at < out.file_bytes && out.problem.empty())
        out.problem = fmt::format("cut short inside frame {} at byte {}", k + 1, at);
      end = out.file_bytes;
      break;
    }
    // a frame of an earlier log (SQLite restarted the log with new salts): not this log's, not lost
    if (std::memcmp(f.data() + 8, h.data() + 16, 8) != 0) {
      end = at;
      break;
    }
    if (!broken) {
      wal_checksum(big, f.data(), 8, sum);
      wal_checksum(big, f.data() + 24, static_cast<size_t>(ps), sum);
      if (wal_be32(f.data()) == 0 || sum[0] != wal_be32(f.data() + 16) || sum[1] != wal_be32(f.data() + 20)) {
        broken = true;
        out.problem = fmt::format("a checksum break in frame {} at byte {}", k + 1, at);
      } else if (wal_be32(f.data() + 4) != 0) {  // a commit frame: everything up to here is read
        out.committed_frames = k + 1;
        out.readable_bytes = at + frame;
      }
    }
  }
  out.unread_bytes = end - out.readable_bytes;
  out.unread_frames = (at - out.readable_bytes) / frame;  // `at`: the end of the last whole frame of this log
  if (out.unread_bytes > 0 && out.problem.empty()) out.problem = "frames after the last commit were never committed";
  if (out.unread_bytes == 0) out.problem.clear();
  return out;
}

std::string describe_unread_wal(const std::string& path, const WalScan& scan) {
  if (scan.unread_bytes <= 0) return "";
  return fmt::format("{}-wal: {} ({} whole frame{}) after its last valid commit (byte {} of {}) cannot be read: {} "
                     "(the file was damaged or cut short, or the killed run had not committed them)",
                     path, format_bytes(scan.unread_bytes), scan.unread_frames, scan.unread_frames == 1 ? "" : "s",
                     scan.readable_bytes, scan.file_bytes, scan.problem);
}

bool checkpoint_abandoned_session(const std::string& path, std::string* why, WalScan* scanned, std::string* kept) {
  auto no = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (kept) kept->clear();
  if (scanned) *scanned = {};
  // Readers that checkpoint take turns on a lock of the -wal (flock; SQLite locks the database and
  // the -shm, never the -wal, so a writer is never kept waiting by it) for the whole check and
  // checkpoint, and open no connection to the file before they have it: the reader holding it is
  // the only one of them with the file open, so neither its checkpoint nor its switch to journal
  // mode DELETE is made to fail by theirs; the next one finds the -wal gone and reads the result.
  // Before, each looked at the session through connections of its own while another tried to
  // checkpoint, or read it already: readers started together all read `crashed`, but every
  // checkpoint failed and the -wal stayed until a later lone `stats`.
  const std::string wal_path = path + "-wal";
  const int wal_fd = ::open(wal_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (wal_fd < 0) return no("no -wal file to checkpoint");
  struct WalLock {
    int fd;
    ~WalLock() { ::close(fd); }  // the -wal's flock, for the next reader (its -wal may be gone now)
  } wal_lock{wal_fd};
  while (flock(wal_fd, LOCK_EX) != 0)  // waits for another reader's checkpoint
    if (errno != EINTR) return no("its -wal cannot be locked");
  // another reader folded it back meanwhile: the -wal is empty, gone, or a new one
  struct stat locked {}, named {};
  if (fstat(wal_fd, &locked) != 0 || locked.st_size == 0 || stat(wal_path.c_str(), &named) != 0 ||
      named.st_ino != locked.st_ino || named.st_dev != locked.st_dev)
    return no("no -wal file to checkpoint");
  const WalScan scan = scan_wal(path);
  if (scanned) *scanned = scan;
  if (!scan.present) return no("no -wal file to checkpoint");
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
  // A shared lock on the session: it cannot be had while a writer holds its LOCK_EX, and it does
  // not look like a writer to the other readers' probes (probe_writer_lock: LOCK_SH).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return no("cannot be opened");
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
    detail::close_keeping_locks(fd);
    return no("a writer holds it");
  }
  // what SQLite cannot read is kept beside it before the checkpoint (which keeps only the readable
  // prefix and empties the -wal): a reader never loses what was recorded (tester47 F11)
  std::string made;
  if (scan.unread_bytes > 0) {
    std::string copy = path + "-wal.damaged";
    for (int i = 1; std::filesystem::exists(copy); ++i) copy = path + "-wal.damaged." + std::to_string(i);
    std::error_code ec;
    std::filesystem::copy_file(wal_path, copy, ec);
    if (ec || std::filesystem::file_size(copy, ec) != static_cast<uintmax_t>(scan.file_bytes)) {
      std::filesystem::remove(copy, ec);
      detail::close_keeping_locks(fd);
      return no("its -wal holds bytes SQLite cannot read and no copy of it could be written");
    }
    made = copy;
  }
  // Leaving WAL mode checkpoints the whole log into FILE.db and deletes the -wal, all or nothing:
  // it needs the only connection to the file, so another program with it open (the workbench,
  // export) leaves it as it was, -wal and all, for a later reader (SQLite answers at once, and
  // with the mode it kept: "wal"). A TRUNCATE checkpoint first, as before, emptied the -wal
  // beside such a reader and then failed to leave WAL mode: FILE.db whole but in WAL mode, which
  // no later reader changed (its -wal was empty).
  sqlite3* db = nullptr;
  bool ok = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK;
  if (ok) {
    sqlite3_busy_timeout(db, 500);
    sqlite3_stmt* st = nullptr;
    ok = sqlite3_prepare_v2(db, "PRAGMA journal_mode=DELETE", -1, &st, nullptr) == SQLITE_OK &&
         sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) &&
         std::strcmp(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "delete") == 0;
    sqlite3_finalize(st);
  }
  sqlite3_close(db);  // before the descriptor: closing it drops this process's POSIX locks
  detail::close_keeping_locks(fd);
  if (!ok && !made.empty()) {  // nothing changed: the -wal is still whole, the copy not needed
    std::error_code ec;
    std::filesystem::remove(made, ec);
    made.clear();
  }
  if (kept) *kept = made;
  return ok ? true : no("another program has the session open (the workbench, export, compare, a script)");
}

}  // namespace embedscope::sessions
