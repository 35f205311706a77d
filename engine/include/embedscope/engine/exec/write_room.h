#pragma once
// What the OS says of a session file's room, for a session that could not be written: SQLite's
// own text ("database or disk is full", "disk I/O error") does not say it (tester50 F5).

#include <sys/resource.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "embedscope/sessions/model/units.h"

namespace embedscope::engine {

/// "; its file system has 0 B free" and, where this process has a file size limit
/// (RLIMIT_FSIZE, `ulimit -f`), "; this process may write files of at most 700.0 KiB", for the
/// folder of `session_path` (the current folder when it has none). "" where neither can be
/// asked. Never throws.
inline std::string session_room_note(const std::string& session_path) {
  std::string note;
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(session_path).parent_path();
  const std::filesystem::space_info sp = std::filesystem::space(dir.empty() ? std::filesystem::path(".") : dir, ec);
  if (!ec) note = fmt::format("; its file system has {} free", sessions::format_bytes(static_cast<int64_t>(sp.available)));
  rlimit r{};
  if (getrlimit(RLIMIT_FSIZE, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    note += fmt::format("; this process may write files of at most {}", sessions::format_bytes(static_cast<int64_t>(r.rlim_cur)));
  return note;
}

}  // namespace embedscope::engine
