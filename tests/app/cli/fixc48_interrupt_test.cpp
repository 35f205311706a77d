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
#include "support/signal_child.h"

namespace {
namespace fixc48_cli = embedscope::cli;
namespace fixc48_ts = embedscope::test_support;
}  // namespace

TEST(Fixc48Interrupt, ASecondSignalAfterAFirstThatCameBeforeTheStopHandlingStillStopsAtOnce) {
  // the old order of `run`: the first signal's handler, a SIGTERM, then the second-signal handling
  const auto [status, out] = fixc48_ts::run_in_child([] {
    const std::atomic<bool>& cancel = fixc48_cli::cancel_on_sigint("first\n");
    fixc48_cli::flight_dump_on_signals();
    raise(SIGTERM);  // the first: handled, cancels
    if (!cancel) _exit(4);
    fixc48_cli::stop_at_once_with(fixc48_ts::child_say_at_stop);
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
  const auto [status, out] = fixc48_ts::run_in_child([] {
    fixc48_cli::stop_at_once_with(fixc48_ts::child_say_at_stop);
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
