#pragma once
// For tests of `launch`: its rank processes (the launcher's children) and the text of the files
// its output went to. Header-only.

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace embedscope::test_support {

/// The whole text of the file at `p` ("" when it cannot be read).
inline std::string file_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// The pids of `pid`'s children (/proc/PID/task/PID/children, proc(5): its main thread's
/// children, which are a single-threaded launcher's ranks); empty when it has none or has ended.
inline std::vector<pid_t> child_pids(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t c; f >> c;) out.push_back(c);
  return out;
}

}  // namespace embedscope::test_support
