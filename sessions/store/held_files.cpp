#include "held_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace embedscope::sessions::detail {

namespace {

using HeldFileId = std::pair<dev_t, ino_t>;

struct HeldFile {
  int holds = 0;
  std::vector<int> kept;  // descriptors whose close waits for the last release
};

std::mutex& held_files_mutex() {
  static std::mutex m;
  return m;
}
std::map<HeldFileId, HeldFile>& held_files() {
  static std::map<HeldFileId, HeldFile> h;
  return h;
}

bool held_file_id(int fd, HeldFileId& id) {
  struct stat sb {};
  if (fd < 0 || ::fstat(fd, &sb) != 0) return false;
  id = {sb.st_dev, sb.st_ino};
  return true;
}

}  // namespace

void hold_file_locks(int fd) {
  HeldFileId id;
  if (!held_file_id(fd, id)) return;
  const std::lock_guard<std::mutex> lock(held_files_mutex());
  ++held_files()[id].holds;
}

void release_file_locks(int fd) {
  HeldFileId id;
  if (!held_file_id(fd, id)) return;
  std::vector<int> to_close;
  {
    const std::lock_guard<std::mutex> lock(held_files_mutex());
    const auto it = held_files().find(id);
    if (it == held_files().end()) return;
    if (--it->second.holds > 0) return;
    to_close = std::move(it->second.kept);
    held_files().erase(it);
  }
  for (int k : to_close) ::close(k);  // the writer's connection is closed: no SQLite lock left to drop
}

void close_keeping_locks(int fd) {
  if (fd < 0) return;
  HeldFileId id;
  if (held_file_id(fd, id)) {
    const std::lock_guard<std::mutex> lock(held_files_mutex());
    const auto it = held_files().find(id);
    if (it != held_files().end()) {
      it->second.kept.push_back(fd);
      return;
    }
  }
  ::close(fd);
}

std::string read_file_prefix(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out(max_bytes, '\0');
  size_t got = 0;
  while (got < max_bytes) {
    const ssize_t n = ::pread(fd, out.data() + got, max_bytes - got, static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close_keeping_locks(fd);
  out.resize(got);
  return out;
}

int kept_descriptors() {
  const std::lock_guard<std::mutex> lock(held_files_mutex());
  int n = 0;
  for (const auto& [id, h] : held_files()) n += static_cast<int>(h.kept.size());
  return n;
}

}  // namespace embedscope::sessions::detail
