// retest47 R2: a first SIGTERM handled ("cancelling after the current step (Ctrl-C again stops at
// once)") before the second-signal handling was installed left the default action for the second
// one: the run died by the signal (rc 143, no JSON). The runs now install the second-signal
// handling first; and stop_at_once_with re-arms a signal whose first one already came. Checked
// in a forked child with raise() (delivered synchronously to the calling thread): no timing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>

#include "interrupt.h"

namespace {
namespace fixc48_cli = embedscope::cli;

// Runs `body` in a forked child whose stdout is a pipe; returns (wait status, what it wrote).
template <class F>
std::pair<int, std::string> fixc48_in_child(F body) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, "pipe failed"};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    body();
    _exit(3);  // body returned: neither signal ended the process
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

void fixc48_at_stop() {
  const char said[] = "at_stop\n";
  [[maybe_unused]] const auto n = write(STDOUT_FILENO, said, sizeof said - 1);
}
}  // namespace

TEST(Fixc48Interrupt, ASecondSignalAfterAFirstThatCameBeforeTheStopHandlingStillStopsAtOnce) {
  // the old order of `run`: the first signal's handler, a SIGTERM, then the second-signal handling
  const auto [status, out] = fixc48_in_child([] {
    const std::atomic<bool>& cancel = fixc48_cli::cancel_on_sigint("first\n");
    fixc48_cli::flight_dump_on_signals();
    raise(SIGTERM);  // the first: handled, cancels
    if (!cancel) _exit(4);
    fixc48_cli::stop_at_once_with(fixc48_at_stop);
    // the second, a request of its own (tester50 F2: a copy within kOneStopRequestMs is the first's)
    std::this_thread::sleep_for(std::chrono::milliseconds(fixc48_cli::kOneStopRequestMs + 100));
    raise(SIGTERM);  // the second: at_stop, then exit 130
    for (;;) pause();
  });
  ASSERT_TRUE(WIFEXITED(status)) << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                          : std::string("?"));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_EQ(out, "at_stop\n");
}

TEST(Fixc48Interrupt, TheRunsOrderHandlesTheSecondSignalFromTheFirst) {
  // the order `run`, the lm_embedding run and `scenario` now use: stop handling, then the first
  // signal's handler; SIGINT twice
  const auto [status, out] = fixc48_in_child([] {
    fixc48_cli::stop_at_once_with(fixc48_at_stop);
    fixc48_cli::cancel_on_sigint("first\n");
    raise(SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(fixc48_cli::kOneStopRequestMs + 100));
    raise(SIGINT);
    for (;;) pause();
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_EQ(out, "at_stop\n");
}
