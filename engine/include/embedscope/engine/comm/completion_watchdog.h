#pragma once
// Waiting for a collective's completion without sleep-polling (issue 14, "asynchronous,
// overlapped, exact"): the waiting thread blocks in the device's own wait (on a GPU,
// cudaEventSynchronize on an event created with cudaEventBlockingSync: the thread sleeps in the
// driver and wakes when the work is done), and a watchdog thread watches the clock and the
// communicator's asynchronous error (ncclCommGetAsyncError). When the timeout passes or the
// communicator reports an error, the watchdog aborts it (ncclCommAbort), which makes the
// blocked wait return, and the waiter reports why. So a collective's end is the moment its
// work completed (plus the thread's wake-up), not up to 1 ms later as with the former
// 10 us .. 1 ms sleeps, and a stuck peer still ends the run after the timeout.
//
// Nothing here touches CUDA or NCCL: the clock, the blocking wait, the error query and the
// abort are functions given to it, so the logic is tested on the host with a fake clock and a
// fake completion (tests/engine/comm/completion_watchdog_test.cpp); comm/nccl/nccl_comm.cpp
// gives it the real ones.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace embedscope::engine {

/// How a watched wait ended.
enum class Completion {
  done,       ///< the work completed before the watchdog acted
  failed,     ///< the communicator reported an asynchronous error; it was aborted
  timed_out,  ///< the timeout passed first; the communicator was aborted
  aborted,    ///< another wait of the same communicator failed or timed out and aborted it
};

/// The outcome of CompletionWatchdog::wait: how it ended and when (hooks.now_ns(): for done,
/// read right after the blocking wait returned; else when the watchdog decided).
struct CompletionOutcome {
  Completion how = Completion::done;
  int64_t end_ns = 0;
};

/// What the watchdog decides for one armed wait at time `now_ns` (pure; the thread's rule):
/// `async_error` first (failed), then the deadline issued_ns + timeout_ns (timed_out when
/// now_ns >= it), else nothing yet (done is returned: keep waiting).
/// Examples: (now 5, issued 0, timeout 10, no error) -> done; (10, 0, 10, no) -> timed_out;
/// (5, 0, 10, error) -> failed.
Completion watchdog_verdict(int64_t now_ns, int64_t issued_ns, int64_t timeout_ns, bool async_error);

/// One watchdog thread per communicator (started at the first wait, stopped by the destructor),
/// serving every wait in flight on it (several threads may wait at once).
class CompletionWatchdog {
 public:
  struct Hooks {
    std::function<int64_t()> now_ns;    ///< monotonic clock, ns (steady_clock on a GPU)
    std::function<bool()> async_error;  ///< the communicator failed (ncclCommGetAsyncError)
    std::function<void()> abort;        ///< abort the communicator: every blocked wait must return
  };
  /// `check_interval_ns` (> 0): how often the thread looks at the async error while waits are
  /// armed (it also wakes at the earliest deadline). Throws std::invalid_argument for a missing
  /// hook or an interval <= 0.
  CompletionWatchdog(Hooks hooks, int64_t check_interval_ns);
  ~CompletionWatchdog();
  CompletionWatchdog(const CompletionWatchdog&) = delete;
  CompletionWatchdog& operator=(const CompletionWatchdog&) = delete;

  /// Arms a deadline of issued_ns + timeout_ns, calls `block` (which returns when the work
  /// completed, or once abort() was called), disarms, and says how it ended. A verdict the
  /// watchdog reached before `block` returned wins over completion (the communicator is
  /// aborted then; the caller must report it). Exceptions of `block` pass through (disarmed).
  CompletionOutcome wait(const std::function<void()>& block, int64_t issued_ns, int64_t timeout_ns);
  /// Times the watchdog called hooks.abort (at most once per failure; 0 or 1 for a communicator
  /// that aborts for good).
  int64_t aborts() const;

 private:
  struct Armed {
    int64_t issued_ns = 0, timeout_ns = 0;
    bool decided = false;
    Completion how = Completion::done;
    int64_t decided_ns = 0;
  };
  void run();

  Hooks hooks_;
  int64_t interval_ns_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::map<uint64_t, Armed> armed_;
  uint64_t next_id_ = 0;
  bool stop_ = false;
  bool fired_ = false;  // the communicator was aborted: later waits end `aborted` at once
  int64_t aborts_ = 0;
  std::thread thread_;
};

}  // namespace embedscope::engine
