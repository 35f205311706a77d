#pragma once
// Runs the embedscope CLI (the path the tests get as EMBEDSCOPE_CLI) the way a user's shell
// does, for end-to-end tests of its commands. Header-only.

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace embedscope::test_support {

/// What one CLI invocation left: its exit status (-1 when it did not exit normally, e.g. a
/// signal) and its whole stdout and stderr.
struct CliResult {
  int code = -1;
  std::string out, err;
};

/// `cli args >scratch/out.txt 2>scratch/err.txt` through std::system; `args` is shell text
/// (quote paths with spaces). The two files are overwritten on every call.
inline CliResult run_cli(const std::string& cli, const std::string& args, const std::filesystem::path& scratch) {
  const std::string out = (scratch / "out.txt").string(), err = (scratch / "err.txt").string();
  const int status = std::system((cli + " " + args + " >" + out + " 2>" + err).c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

}  // namespace embedscope::test_support
