#pragma once
// How long this process did not run: a ticker thread wakes every 10 ms and records each gap
// between two of its wake-ups longer than 100 ms as a pause (the process was stopped - SIGSTOP,
// Ctrl-Z, a debugger - or not scheduled: swapped out, a frozen VM). jHiccup measures a JVM's
// stalls the same way. A collective that failed asks how much of its own time fell into pauses:
// a rank that was itself stopped for longer than the timeout inside a collective is the cause of
// its peers' timeouts, not their victim (tester53 F4: the stopped rank blamed "a peer stopped
// sending"). Internal to the engine (comm/gloo/process_group.cpp).

#include <cstdint>
#include <string>
#include <vector>

namespace embedscope::engine {

/// One pause: [begin_ns, end_ns) on the steady clock (ns since its epoch).
struct Pause {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

/// The ns of [from_ns, to_ns) that fall into `pauses` (any order; overlapping pauses count once).
/// 0 when to_ns <= from_ns. Pure. Example: pauses {[100, 400), [350, 500), [900, 1000)} over
/// [200, 950): [200, 500) and [900, 950) = 350.
int64_t paused_within(std::vector<Pause> pauses, int64_t from_ns, int64_t to_ns);

/// The words of a collective that failed while this rank's own process did not run for longer than
/// the timeout inside it: "HEAD failed: this rank's own process did not run for 4.0 s while inside
/// it (stopped - SIGSTOP, Ctrl-Z, a debugger - or not scheduled), longer than the 300 ms collective
/// timeout: its peers gave up waiting for it, no peer failed first (WHAT)". `paused_ns`,
/// `timeout_ms` > 0. Pure.
std::string self_paused_text(const std::string& head, int64_t paused_ns, int64_t timeout_ms, const std::string& what);

/// The process's pause ticker.
class PauseWatch {
 public:
  /// Started at the first call; its ticker runs until the process exits. A child forked after it
  /// started gets its own at its first call. Thread-safe.
  static PauseWatch& instance();
  /// The ns of [from_ns, to_ns) (steady clock) this process spent in pauses. Waits up to 200 ms for
  /// the ticker to run past `to_ns` (after a SIGCONT every thread wakes at once, the ticker maybe
  /// after the caller); if it has not, the gap since its last wake-up counts as a pause too. 0 on a
  /// watch inherited over fork() (obtained before it, used in the child: no ticker filled it).
  int64_t paused_ns(int64_t from_ns, int64_t to_ns);

  /// Steady clock now, ns since its epoch (the clock of the arguments above).
  static int64_t now_ns();

 private:
  PauseWatch();
  void start();  // starts the ticker (instance(), once this watch is the process's)
  struct State;
  State* state_;  // never freed: the detached ticker uses it until the process exits
};

}  // namespace embedscope::engine
