#include "store/end_reserve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace embedscope::sessions::detail {

namespace {
bool end_reserve_no_room(int err) { return err == ENOSPC || err == EDQUOT || err == EFBIG; }

// Writes `bytes` zeros at the start of `fd` (a file system without fallocate); 0 or errno.
int end_reserve_write_zeros(int fd, int64_t bytes) {
  const std::vector<char> zeros(64 * 1024, 0);
  int64_t done = 0;
  while (done < bytes) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(bytes - done, static_cast<int64_t>(zeros.size())));
    const ssize_t w = ::pwrite(fd, zeros.data(), n, done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : ENOSPC;
    done += w;
  }
  return ::fdatasync(fd) == 0 ? 0 : errno;
}
}  // namespace

std::string EndReserve::hold(const std::string& session_path, int64_t bytes) {
  release();
  std::filesystem::path dir = std::filesystem::path(session_path).parent_path();
  if (dir.empty()) dir = ".";
  int fd = -1;
#ifdef O_TMPFILE
  fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (fd < 0) {  // no unnamed files here: a named one, removed at once
    std::string name = (dir / ".embedscope-reserve-XXXXXX").string();
    fd = ::mkstemp(name.data());
    if (fd < 0) return end_reserve_no_room(errno) ? std::strerror(errno) : "";
    ::unlink(name.c_str());
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  int err = ::posix_fallocate(fd, 0, bytes);  // returns the error (does not set errno)
  if (err == EOPNOTSUPP || err == EINVAL) err = end_reserve_write_zeros(fd, bytes);
  if (err != 0) {
    ::close(fd);
    return end_reserve_no_room(err) ? std::strerror(err) : "";
  }
  fd_ = fd;
  return "";
}

void EndReserve::release() {
  if (fd_ < 0) return;
  (void)::ftruncate(fd_, 0);  // the blocks go back now, even if a copy of the descriptor lives on (fork)
  ::close(fd_);
  fd_ = -1;
}

}  // namespace embedscope::sessions::detail
