#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"

extern char** environ;

namespace embedscope::sessions::importers {

namespace {
std::string base_name(const std::string& p) {
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string sqlite_name(const std::string& rep) {
  std::string b = rep;
  const std::string ext = ".nsys-rep";
  if (b.size() > ext.size() && b.compare(b.size() - ext.size(), ext.size(), ext) == 0) b.resize(b.size() - ext.size());
  return b + ".sqlite";
}

std::string tail_of(const std::string& path, size_t max_lines) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i) out.append("\n  ").append(lines[i]);
  return out;
}
}  // namespace

std::string find_nsys_on_path() {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::stringstream ss(path);
  for (std::string dir; std::getline(ss, dir, ':');) {
    const std::string cand = (dir.empty() ? std::string(".") : dir) + "/nsys";  // an empty entry is the current directory
    struct stat sb {};
    if (stat(cand.c_str(), &sb) == 0 && S_ISREG(sb.st_mode) && access(cand.c_str(), X_OK) == 0) return cand;
  }
  return "";
}

std::string nsys_export_command(const std::string& rep) {
  return fmt::format("nsys export --type sqlite -o {} {}", sqlite_name(rep), rep);
}

std::string export_nsys_report(const std::string& rep, const std::string& out_dir) {
  const std::string nsys = find_nsys_on_path();
  if (nsys.empty())
    throw ImportError(fmt::format("{}: not a format embedscope import reads by its content; named as an Nsight "
                                  "Systems report, which nsys (not on PATH) would export: if it is one, export it "
                                  "with `{}` and import {}", rep, nsys_export_command(rep), sqlite_name(rep)));
  const std::string out = out_dir + "/" + sqlite_name(base_name(rep));
  const std::string log = out + ".log";
  std::vector<std::string> args{nsys, "export", "--type", "sqlite", "-o", out, rep};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, nsys.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    throw ImportError(fmt::format("{}: cannot run {}: {}; export it with `{}`", rep, nsys, std::strerror(rc),
                                  nsys_export_command(rep)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  struct stat sb {};
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok || stat(out.c_str(), &sb) != 0)
    throw ImportError(fmt::format("{}: `{} export --type sqlite -o {} {}` {}; it printed:{}", rep, nsys, out, rep,
                                  !ok ? (WIFEXITED(status) ? fmt::format("exited with status {}", WEXITSTATUS(status))
                                                           : std::string("was killed by a signal"))
                                      : std::string("wrote no file"),
                                  tail_of(log, 5)));
  return out;
}

}  // namespace embedscope::sessions::importers
