// A full disk for tests: a small tmpfs mounted in a private mount namespace of a forked child
// (root, or an unprivileged user namespace; tests skip where neither is allowed), filled to its
// last byte, and a session written there until its writes fail (fixh50_full_disk_test,
// fix51_full_disk_reader_test). Header-only.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::test_support {

namespace fs = std::filesystem;

constexpr int kNoTmpfs = 77;  // in_tmpfs's result where no tmpfs could be mounted

inline bool full_disk_write_file(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// A mount namespace of this (single-threaded, forked) process in which a mount is allowed: as
// root, a new one; else a user namespace mapping this user to root in it.
inline bool private_mounts() {
  if (geteuid() == 0) return unshare(CLONE_NEWNS) == 0;
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
  full_disk_write_file("/proc/self/setgroups", "deny");
  return full_disk_write_file("/proc/self/uid_map", fmt::format("0 {} 1", uid)) &&
         full_disk_write_file("/proc/self/gid_map", fmt::format("0 {} 1", gid));
}

// Runs `body` in a child process that sees a tmpfs of `size` (mount's size=, e.g. "400k") at
// `at`, gone with the child; returns body's result, kNoTmpfs where no tmpfs could be mounted.
inline int in_tmpfs(const fs::path& at, const std::string& size, const std::function<int()>& body) {
  const pid_t child = fork();
  if (child == 0) {
    if (!private_mounts() || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", at.c_str(), "tmpfs", 0, ("size=" + size).c_str()) != 0)
      _exit(kNoTmpfs);
    _exit(body());
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Takes every byte left on the file system of `dir` (a file dir/`name` written until the disk is
// full).
inline void fill_disk(const fs::path& dir, const std::string& name = "filler") {
  const int fd = ::open((dir / name).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const std::vector<char> block(64 * 1024, 'x');
  for (size_t chunk : {block.size(), size_t{4096}, size_t{1}})
    while (::write(fd, block.data(), chunk) == static_cast<ssize_t>(chunk)) {
    }
  ::close(fd);
}

// Waits (up to 20 s) for `done`; the test's outcome never depends on how long it took.
inline bool full_disk_wait_until(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

inline int64_t full_disk_committed_steps(const std::string& db) {
  try {
    const embedscope::sessions::SessionReader r(db);
    return static_cast<int64_t>(r.steps().size());
  } catch (const std::exception&) {
    return -1;
  }
}

// In the tmpfs `full`: a session s.db of 10 committed steps; the disk then filled but for `room`
// bytes; `more` steps that cannot all be committed (the writer says write_failed); its close()
// refused (SessionError: the failure said). The session's files are copied to dir/s.db(-wal) for
// the test to read. 0, or the code of what went wrong: 10 the steps never committed, 11 no write
// failure, 12 close() said nothing, 13 the copy failed, 14 the room not made, 15 no -wal left when
// `wal_required` (the checkpoint cannot have run on the full disk).
inline int session_on_full_disk(const fs::path& dir, const fs::path& full, int64_t room, int64_t more, bool wal_required) {
  namespace ss = embedscope::sessions;
  const std::string db = (full / "s.db").string();
  int code = 0;
  {
    ss::SessionWriter w(db);
    w.set_metadata(ss::meta::kWorldSize, "1");
    w.add_lane({0, 0, "compute", "thread"});
    for (int64_t s = 0; s < 10; ++s) w.add_step({s, 0, s * 1'000'000, (s + 1) * 1'000'000, 0.5, 0, 0});
    if (!full_disk_wait_until([&] { return full_disk_committed_steps(db) == 10; })) return 10;
    fill_disk(full);
    if (room > 0 &&
        ::truncate((full / "filler").c_str(), static_cast<off_t>(fs::file_size(full / "filler")) - room) != 0)
      return 14;
    for (int64_t s = 10; s < 10 + more; ++s) w.add_step({s, 0, s * 1'000'000, (s + 1) * 1'000'000, 0.5, 0, 0});
    if (!full_disk_wait_until([&] { return w.write_failed(); })) return 11;
    try {
      w.close("complete");
      code = 12;  // the failure must be said
    } catch (const ss::SessionError&) {
    }
  }
  if (wal_required && !fs::exists(db + "-wal")) return 15;
  std::error_code ec;
  for (const char* suffix : {"", "-wal"})
    if (fs::exists(db + suffix)) fs::copy_file(db + suffix, (dir / "s.db").string() + suffix, ec);
  return ec ? 13 : code;
}

}  // namespace embedscope::test_support
