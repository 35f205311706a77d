#pragma once
// Runs the embedscope CLI (the path the tests get as EMBEDSCOPE_CLI) the way a user's shell
// does, for end-to-end tests of its commands. Header-only.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

/// `cmd 2>&1` through popen: its exit status (-1 when it did not exit normally) and its stdout and
/// stderr together in `out` (`err` empty), as a user's terminal shows them; `cmd` is shell text.
inline CliResult run_merged(const std::string& cmd) {
  CliResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// How a run stopped by stop_twice ended: its wait status (waitpid), the SIGTERMs sent (0-2) and
/// its whole stderr.
struct StoppedRun {
  int status = 0;
  int sent = 0;
  std::string err;
};

/// How long stop_twice waits after the first signal's acknowledgement before its second: more
/// than app/cli/interrupt.h's kOneStopRequestMs (500), within which a second copy of the signal is
/// the same request (coreutils timeout sends two; tester50 F2), so that the second is a request of
/// its own. A lower bound, not a measurement: the second signal comes at least this long after
/// the first was handled.
constexpr int kSecondStopRequestAfterMs = 600;

/// Runs `cli` with `args` (no shell; stdout to the file `out`), reading its stderr line by line:
/// SIGTERM once a line holds `first`, again once a later line holds "cancelling after the current
/// step" (the first signal acknowledged) and kSecondStopRequestAfterMs have passed - a second
/// Ctrl-C / SIGTERM, not a copy of the first. A pipe that cannot be made: nothing runs, `err`
/// says so.
inline StoppedRun stop_twice(const char* cli, const std::vector<std::string>& args, const std::string& out,
                             const std::string& first) {
  StoppedRun s;
  int fds[2];
  if (pipe(fds) != 0) {
    s.err = "pipe() failed";
    return s;
  }
  const pid_t child = fork();
  if (child == 0) {
    dup2(fds[1], 2);
    dup2(open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv{const_cast<char*>(cli)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(cli, argv.data());
    _exit(127);
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, in) > 0) {
    s.err += line;
    const std::string l(line);
    if (s.sent == 0 && l.find(first) != std::string::npos) {
      kill(child, SIGTERM);
      ++s.sent;
    } else if (s.sent == 1 && l.find("cancelling after the current step") != std::string::npos) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kSecondStopRequestAfterMs));
      kill(child, SIGTERM);
      ++s.sent;
    }
  }
  free(line);
  fclose(in);
  waitpid(child, &s.status, 0);
  return s;
}

/// How a run stopped by kill_when ended: its wait status (waitpid) and whether `ready` held
/// before the SIGKILL (false: the time limit came first, or the run ended by itself).
struct KilledRun {
  int status = 0;
  bool ready = false;
};

/// Runs `cli` with `args` (no shell; stdout and stderr to /dev/null) and sends it SIGKILL once
/// `ready()` returns true (asked every 100 ms; an exception from it counts as false, e.g. a
/// session file being created), or after `limit_ms` - a crash or `kill -9` without timing: the
/// caller's `ready` reads what the run has recorded so far. Stops asking when the run exits by
/// itself (then `status` is its own).
inline KilledRun kill_when(const char* cli, const std::vector<std::string>& args, const std::function<bool()>& ready,
                           int limit_ms = 60000) {
  KilledRun k;
  const pid_t child = fork();
  if (child == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    std::vector<char*> argv{const_cast<char*>(cli)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(cli, argv.data());
    _exit(127);
  }
  if (child < 0) return k;
  for (int waited = 0; waited < limit_ms && !k.ready; waited += 100) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (waitpid(child, &k.status, WNOHANG) == child) return k;  // it ended by itself
    try {
      k.ready = ready();
    } catch (const std::exception&) {
      k.ready = false;
    }
  }
  kill(child, SIGKILL);
  waitpid(child, &k.status, 0);
  return k;
}

}  // namespace embedscope::test_support
