#pragma once
// Runs the embedscope CLI (the path the tests get as EMBEDSCOPE_CLI) the way a user's shell
// does, for end-to-end tests of its commands. Header-only.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
#include <utility>
#include <vector>

extern char** environ;

namespace embedscope::test_support {

/// What one CLI invocation left: its exit status (-1 when it did not exit normally, e.g. a
/// signal) and its whole stdout and stderr.
struct CliResult {
  int code = -1;
  std::string out, err;
};

/// temp_directory_path() / name, emptied and created: a test's scratch folder (the test process's
/// TMPDIR is its own, support/test_tmpdir.h). Throws std::filesystem::filesystem_error when it
/// cannot be made.
inline std::filesystem::path fresh_scratch(const std::string& name) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

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

/// What run_signalled left: the child's wait status (waitpid: WIFEXITED / WIFSIGNALED), the
/// signals it sent, everything the child wrote to the piped stream(s) and, read back after its end,
/// the file its other stream went to ("" for /dev/null or when both streams are piped).
struct SignalledRun {
  int status = 0;
  int sent = 0;
  std::string piped, other;
};

/// When run_signalled sends its next signal. `text`: once the piped output read since the previous
/// signal (since the start for the first) holds it. `ready`: once ready(child's pid) returns true,
/// asked every `poll_ms` ms at most while the output is quiet and after each piece read. Both
/// empty (SignalWhen{} or ""): at once, as the child starts (it may not have reached main yet).
struct SignalWhen {
  SignalWhen() = default;
  SignalWhen(std::string holds) : text(std::move(holds)) {}  // NOLINT: a text converts, {"step 1/"}
  SignalWhen(const char* holds) : text(holds) {}             // NOLINT
  explicit SignalWhen(std::function<bool(int pid)> when_ready, int poll = 1)
      : ready(std::move(when_ready)), poll_ms(poll) {}
  std::string text;
  std::function<bool(int pid)> ready;
  int poll_ms = 1;
  int delay_ms = 0;  ///< once the condition holds, the signal waits this long (ms)
};

/// How run_signalled starts the child.
struct ChildIo {
  ChildIo(int piped_streams = 2, std::string other = "/dev/null") : piped(piped_streams), other_file(std::move(other)) {}
  int piped;                     ///< read through a pipe: 1 stdout, 2 stderr, 3 both (as written)
  std::string other_file;        ///< where the stream not piped goes (truncated)
  std::vector<std::string> env;  ///< "NAME=value" set on top of this process's environment
  long long file_size_limit = 0; ///< bytes (RLIMIT_FSIZE, SIGXFSZ ignored: a write past it fails
                                 ///< with EFBIG, as on a full disk); 0: none
};

/// Runs `exe` with `args` (no shell), reading `io.piped` to its end, and sends `sig` once for each
/// of `when` in turn (an empty `when`: none; the later ones wait for the earlier). Waits for the
/// child. A child that ends before a condition is met gets no more signals (`sent` says how many
/// it got). A pipe that cannot be made or a fork that fails: nothing runs, `piped` says so and
/// `status` is -1.
inline SignalledRun run_signalled(const std::string& exe, const std::vector<std::string>& args, int sig,
                                  const std::vector<SignalWhen>& when, const ChildIo& io = {}) {
  SignalledRun s;
  // argv and envp before fork (the child only dup2s, sets its limit and execs)
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    bool replaced = false;
    for (const auto& o : io.env) replaced |= kv.compare(0, o.find('=') + 1, o, 0, o.find('=') + 1) == 0;
    if (!replaced) env_text.push_back(kv);
  }
  env_text.insert(env_text.end(), io.env.begin(), io.env.end());
  std::vector<char*> argv{const_cast<char*>(exe.c_str())}, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) {
    s.status = -1;
    s.piped = "pipe() failed";
    return s;
  }
  const pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    s.status = -1;
    s.piped = "fork() failed";
    return s;
  }
  if (child == 0) {
    const int other = open(io.other_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (io.piped != 2) dup2(fds[1], 1);
    if (io.piped != 1) dup2(fds[1], 2);
    if (io.piped == 1) dup2(other, 2);
    if (io.piped == 2) dup2(other, 1);
    close(fds[0]);
    close(fds[1]);
    if (io.file_size_limit > 0) {
      signal(SIGXFSZ, SIG_IGN);
      const rlimit r{static_cast<rlim_t>(io.file_size_limit), static_cast<rlim_t>(io.file_size_limit)};
      setrlimit(RLIMIT_FSIZE, &r);
    }
    execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  size_t next = 0, from = 0;  // the condition due; where its text is looked for in `piped`
  auto due = [&] {
    while (next < when.size()) {
      const SignalWhen& w = when[next];
      bool now = w.text.empty() && !w.ready;
      if (!w.text.empty()) {
        const size_t at = s.piped.find(w.text, from);
        if (at != std::string::npos) {
          now = true;
          from = at + w.text.size();
        } else if (s.piped.size() >= w.text.size()) {
          from = std::max(from, s.piped.size() - w.text.size() + 1);
        }
      } else if (w.ready) {
        now = w.ready(child);
        if (now) from = s.piped.size();
      }
      if (!now) return;
      if (w.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(w.delay_ms));
      kill(child, sig);
      ++s.sent;
      ++next;
    }
  };
  due();
  char buf[4096];
  for (;;) {
    const bool polled = next < when.size() && when[next].ready;
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, polled ? std::max(1, when[next].poll_ms) : -1) > 0) {
      const ssize_t n = read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      s.piped.append(buf, static_cast<size_t>(n));
    }
    due();
  }
  close(fds[0]);
  waitpid(child, &s.status, 0);
  if (io.piped != 3 && io.other_file != "/dev/null") {
    std::ifstream f(io.other_file);
    std::stringstream o;
    o << f.rdbuf();
    s.other = o.str();
  }
  return s;
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

/// Runs `cli` with `args` (no shell; stdout to the file `out`), reading its stderr: SIGTERM once it
/// holds `first`, again once what it writes after that holds "cancelling after the current step"
/// (the first signal acknowledged) and kSecondStopRequestAfterMs have passed - a second Ctrl-C /
/// SIGTERM, not a copy of the first (run_signalled). A pipe that cannot be made: nothing runs,
/// `err` says so.
inline StoppedRun stop_twice(const char* cli, const std::vector<std::string>& args, const std::string& out,
                             const std::string& first) {
  SignalWhen second("cancelling after the current step");
  second.delay_ms = kSecondStopRequestAfterMs;
  const SignalledRun r = run_signalled(cli, args, SIGTERM, {{first}, second}, {2, out});
  return {r.status, r.sent, r.piped};
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
