// The collective-completion watchdog (comm/completion_watchdog.h), which replaces NCCL's
// sleep-polling: the rule (hand-computed), and the thread against a fake clock and a fake
// completion - the waiter blocks until the "device" completes, the end time is the clock at that
// completion (not a poll later), a timeout or an asynchronous error aborts exactly once and the
// blocked wait returns with the reason; other waits on the aborted communicator end `aborted`.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "embedscope/engine/comm/completion_watchdog.h"

namespace es = embedscope::engine;

namespace {
// A completion the test (or the abort hook) signals; block() waits for it.
class FakeCompletion {
 public:
  void complete() {
    {
      std::lock_guard lock(m_);
      done_ = true;
    }
    cv_.notify_all();
  }
  void block() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
};

struct FakeComm {
  std::atomic<int64_t> now{0};
  std::atomic<bool> error{false};
  std::atomic<int> aborts{0};
  FakeCompletion work;
  es::CompletionWatchdog::Hooks hooks() {
    es::CompletionWatchdog::Hooks h;
    h.now_ns = [this] { return now.load(); };
    h.async_error = [this] { return error.load(); };
    h.abort = [this] {
      ++aborts;
      work.complete();  // as ncclCommAbort makes the NCCL kernels exit and the event complete
    };
    return h;
  }
};
constexpr int64_t kInterval = 1'000'000;  // 1 ms of real time between the watchdog's looks
}  // namespace

TEST(CompletionWatchdog, VerdictRule) {
  EXPECT_EQ(es::watchdog_verdict(5, 0, 10, false), es::Completion::done);  // keep waiting
  EXPECT_EQ(es::watchdog_verdict(9'999, 0, 10'000, false), es::Completion::done);
  EXPECT_EQ(es::watchdog_verdict(10'000, 0, 10'000, false), es::Completion::timed_out);
  EXPECT_EQ(es::watchdog_verdict(1'500, 1'000, 400, false), es::Completion::timed_out);
  EXPECT_EQ(es::watchdog_verdict(5, 0, 10, true), es::Completion::failed);  // the error first
  EXPECT_EQ(es::watchdog_verdict(50, 0, 10, true), es::Completion::failed);
}

TEST(CompletionWatchdog, EndTimeIsTheCompletionNotAPollLater) {
  FakeComm c;
  es::CompletionWatchdog w(c.hooks(), kInterval);
  c.now = 1'000;
  std::thread device([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c.now = 1'234'567;  // the fake clock when the work completes
    c.work.complete();
  });
  const es::CompletionOutcome out = w.wait([&] { c.work.block(); }, 1'000, 5'000'000'000);
  device.join();
  EXPECT_EQ(out.how, es::Completion::done);
  EXPECT_EQ(out.end_ns, 1'234'567);
  EXPECT_EQ(c.aborts, 0);
  EXPECT_EQ(w.aborts(), 0);
}

TEST(CompletionWatchdog, TimeoutAbortsOnceAndTheBlockedWaitReturnsTimedOut) {
  FakeComm c;
  es::CompletionWatchdog w(c.hooks(), kInterval);
  std::thread clock([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    c.now = 999;  // not yet: issued 0, timeout 1000
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    c.now = 1'000;  // the deadline
  });
  const es::CompletionOutcome out = w.wait([&] { c.work.block(); }, 0, 1'000);  // returns only after the abort
  clock.join();
  EXPECT_EQ(out.how, es::Completion::timed_out);
  EXPECT_EQ(out.end_ns, 1'000);
  EXPECT_EQ(c.aborts, 1);
  EXPECT_EQ(w.aborts(), 1);
  // the communicator is gone: a later wait does not block and says so
  EXPECT_EQ(w.wait([] { FAIL() << "blocked on an aborted communicator"; }, 2'000, 1'000).how, es::Completion::aborted);
  EXPECT_EQ(c.aborts, 1);
}

TEST(CompletionWatchdog, AsyncErrorAbortsAndFailsEveryWaitOnTheCommunicator) {
  FakeComm c;
  es::CompletionWatchdog w(c.hooks(), kInterval);
  c.now = 50;
  es::CompletionOutcome other{};
  std::thread second([&] { other = w.wait([&] { c.work.block(); }, 0, 1'000'000); });  // another thread's wait
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::atomic<bool> finished{false};
  std::thread fail([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    c.error = true;
    // should the error be ignored, end the waits by their deadline after 2 s (a failure, not a hang)
    for (int i = 0; i < 200 && !finished; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!finished) c.now = 2'000'000;
  });
  const es::CompletionOutcome out = w.wait([&] { c.work.block(); }, 0, 1'000'000);
  finished = true;
  fail.join();
  second.join();
  // the communicator's error is every wait's reason; both end, one abort
  EXPECT_EQ(out.how, es::Completion::failed);
  EXPECT_EQ(other.how, es::Completion::failed);
  EXPECT_EQ(out.end_ns, 50);
  EXPECT_EQ(c.aborts, 1);
}

TEST(CompletionWatchdog, WorkDoneBeforeTheDeadlineIsNeverAbortedAndWaitsAreReused) {
  FakeComm c;
  es::CompletionWatchdog w(c.hooks(), kInterval);
  for (int i = 0; i < 50; ++i) {  // completions that return at once: no abort, no verdict
    c.now = 100 * i;
    const es::CompletionOutcome out = w.wait([] {}, 100 * i, 1'000);
    EXPECT_EQ(out.how, es::Completion::done);
    EXPECT_EQ(out.end_ns, 100 * i);
  }
  EXPECT_EQ(c.aborts, 0);
  // an exception of the blocking call passes through and disarms the wait
  EXPECT_THROW(w.wait([] { throw std::runtime_error("cudaEventSynchronize failed"); }, c.now, 1'000),
               std::runtime_error);
  c.now = 1'000'000;  // far past that wait's deadline: nothing is armed, nothing aborts
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(c.aborts, 0);
  EXPECT_THROW(es::CompletionWatchdog(c.hooks(), 0), std::invalid_argument);
}
