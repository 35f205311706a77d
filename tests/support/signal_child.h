// Test helpers for signal handling: a function run in a forked child (its stdout read back), and a
// process stopped as coreutils `timeout` stops it (SIGTERM to it, then to its process group). For
// running the CLI and signalling it on a line of its output, see cli_run.h (run_signalled).
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace embedscope::test_support {

/// Runs `body` in a forked child whose stdout is a pipe; returns (wait status, what it wrote).
/// A `body` that returns ends the child with exit status 3 (no signal ended it).
template <class F>
std::pair<int, std::string> run_in_child(F body) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, "pipe failed"};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    body();
    _exit(3);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {status, out};
}

/// Writes `what` to stdout with write(2) (async-signal-safe: for stop handlers and forked children).
inline void child_say(const char* what) { [[maybe_unused]] const auto n = write(STDOUT_FILENO, what, std::strlen(what)); }

/// A stop-at-once handler for run_in_child's bodies: says "at_stop\n".
inline void child_say_at_stop() { child_say("at_stop\n"); }

/// What stop_as_timeout_does left: the wait status, whether the signals were sent, all of stderr.
struct TimeoutStop {
  int status = 0;
  bool sent = false;
  std::string err;
};

/// Runs `exe` with `args` (no shell) in a process group of its own, stdout to /dev/null, reading
/// its stderr line by line; at the first line `ready(line)` accepts, sends SIGTERM to the process
/// and then to its group - what coreutils `timeout` sends (tester50 F2). Waits for the process.
inline TimeoutStop stop_as_timeout_does(const std::string& exe, const std::vector<std::string>& args,
                                        const std::function<bool(const std::string&)>& ready) {
  TimeoutStop s;
  std::vector<char*> argv{const_cast<char*>(exe.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) {
    s.status = -1;
    s.err = "pipe() failed";
    return s;
  }
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    dup2(fds[1], 2);
    dup2(open("/dev/null", O_WRONLY), 1);
    close(fds[0]);
    close(fds[1]);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  if (child < 0) {
    close(fds[0]);
    s.status = -1;
    s.err = "fork() failed";
    return s;
  }
  setpgid(child, child);  // either call makes the group, whichever runs first
  FILE* in = fdopen(fds[0], "r");
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, in) > 0) {
    s.err += line;
    if (!s.sent && ready(line)) {
      kill(child, SIGTERM);   // coreutils timeout: the command
      kill(-child, SIGTERM);  // and its process group (timeout's own, which holds the command)
      s.sent = true;
    }
  }
  free(line);
  fclose(in);
  waitpid(child, &s.status, 0);
  return s;
}

}  // namespace embedscope::test_support
