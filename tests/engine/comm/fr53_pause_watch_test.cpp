// tester53 F4: the rank that was itself SIGSTOPped inside a collective blamed "a peer stopped
// sending". A ticker thread now records the gaps in which the process did not run (pause_watch.h);
// a failed collective whose own time fell into pauses for longer than its timeout says so.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "comm/gloo/pause_watch.h"

namespace fr53_pw = embedscope::engine;

TEST(Fr53PauseWatch, PausedWithinCountsTheOverlapOnce) {
  // {[100, 400), [350, 500), [900, 1000)} over [200, 950): [200, 500) and [900, 950)
  EXPECT_EQ(fr53_pw::paused_within({{900, 1000}, {100, 400}, {350, 500}}, 200, 950), 350);
  EXPECT_EQ(fr53_pw::paused_within({{100, 400}}, 0, 1000), 300);
  EXPECT_EQ(fr53_pw::paused_within({{100, 400}}, 400, 1000), 0);  // ends where the window begins
  EXPECT_EQ(fr53_pw::paused_within({{100, 400}, {120, 130}}, 0, 1000), 300);  // one inside another
  EXPECT_EQ(fr53_pw::paused_within({}, 0, 1000), 0);
  EXPECT_EQ(fr53_pw::paused_within({{100, 400}}, 500, 500), 0);
  EXPECT_EQ(fr53_pw::paused_within({{100, 400}}, 500, 200), 0);
}

TEST(Fr53PauseWatch, TheSelfPausedTextNamesThisRankNotAPeer) {
  EXPECT_EQ(fr53_pw::self_paused_text("all_gather 'x' (group world, sequence 1189)", 4'008'000'000, 300,
                                      "Timed out waiting 300ms for send operation to complete"),
            "all_gather 'x' (group world, sequence 1189) failed: this rank's own process did not run for 4.0 s while "
            "inside it (stopped - SIGSTOP, Ctrl-Z, a debugger - or not scheduled), longer than the 300 ms collective "
            "timeout: its peers gave up waiting for it, no peer failed first (Timed out waiting 300ms for send "
            "operation to complete)");
}

TEST(Fr53PauseWatch, AProcessStoppedAndContinuedSeesThePause) {
  // a child stops itself (SIGSTOP); the parent continues it 600 ms after it stopped; the child's
  // watch then counts at least 400 ms of that window as paused (the tick and scheduling leave
  // some out), and at most the window itself. Exit 0: as expected; 1: too little; 2: too much.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto& w = fr53_pw::PauseWatch::instance();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the ticker has ticked
    const int64_t from = fr53_pw::PauseWatch::now_ns();
    raise(SIGSTOP);
    const int64_t to = fr53_pw::PauseWatch::now_ns();
    const int64_t paused = w.paused_ns(from, to);
    _exit(paused < 400'000'000 ? 1 : paused > to - from ? 2 : 0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(st));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  ASSERT_EQ(kill(child, SIGCONT), 0);
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}
