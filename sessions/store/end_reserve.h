#pragma once
// Room held on a session's file system for its end mark (retest49 R3).

#include <cstdint>
#include <string>

namespace embedscope::sessions::detail {

/// Bytes a writer holds for the commit of its end mark after a failed write: the metadata rows
/// `ended` and `end_message` touch a few 16 KiB pages (table and index leaves, an interior page
/// where one splits), each a WAL frame of 16 KiB + 24 bytes, plus a -shm extension of 32 KiB:
/// 256 KiB holds that several times over.
constexpr int64_t kEndReserveBytes = 256 * 1024;

/// Space allocated on the file system of a session, in a file nobody can see (O_TMPFILE in the
/// session's folder, else a file removed as soon as it is created), freed by release() just
/// before the writer commits its end mark after a failed write (a full disk): every commit in WAL
/// mode appends frames to the -wal, so an end mark needs new room even where it only rewrites a
/// row, and a disk filled by the run itself (or by the other ranks of a launch) has none left.
/// Its blocks go back to the file system when the writer's process ends, however it ends.
class EndReserve {
 public:
  EndReserve() = default;
  /// Allocates `bytes` beside `session_path` (its folder). Returns "" on success or where the
  /// file system cannot hold such a file at all (then nothing is held: best effort), else the
  /// reason there is no room: strerror of ENOSPC, EDQUOT or EFBIG ("No space left on device").
  std::string hold(const std::string& session_path, int64_t bytes);
  /// Frees the space (the file's blocks go back to the file system at once). Idempotent.
  void release();
  bool held() const { return fd_ >= 0; }
  ~EndReserve() { release(); }
  EndReserve(const EndReserve&) = delete;
  EndReserve& operator=(const EndReserve&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace embedscope::sessions::detail
