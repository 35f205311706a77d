#pragma once
// The other load a measured run shares this machine with, counted in runnable threads (the unit
// of the cost model's contention term, cost/hardware_profile.h CpuContention): a thread samples
// every `period` the machine's runnable threads (/proc/stat "procs_running": running or ready to
// run, all processes) and this process's own (the threads of /proc/self/task in state R), and
// keeps the mean of their difference. Unlike ranks x other cores / own cores (session metadata
// cpu_other_cores / cpu_self_cores), it does not assume that every rank thread is always
// runnable: a rank waiting at a collective sleeps and is not counted as ours nor as theirs.
// The sampling thread itself is runnable while it reads, so it is in both counts and cancels.
// Linux only (proc(5)); elsewhere, or when /proc/stat is unreadable, no sample is taken.

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace embedscope::engine {

/// The "procs_running N" figure of /proc/stat's text (proc(5): threads running or ready to run
/// on the whole machine), >= 0; -1 when the line is absent or malformed.
/// Example: "cpu 1 2 3\nprocs_running 5\nprocs_blocked 0\n" -> 5.
int procs_running_in(const std::string& proc_stat_text);

/// The state letter of a /proc/PID/task/TID/stat line (proc(5) field 3, after the command name
/// in parentheses, which may itself hold ") "): 'R' running or runnable, 'S' sleeping, ...;
/// '?' when malformed. Example: "12 (rank 0) R 1 ..." -> 'R'; "12 (a) b) S 1" -> 'S'.
char task_state_in(const std::string& task_stat_text);

/// Samples the other processes' runnable threads from construction until stop() (or
/// destruction): a background thread, every `period`, reads /proc/stat and this process's task
/// states; other = max(0, procs_running - own runnable).
class RunnableSampler {
 public:
  explicit RunnableSampler(std::chrono::milliseconds period = std::chrono::milliseconds(20));
  ~RunnableSampler();
  RunnableSampler(const RunnableSampler&) = delete;
  RunnableSampler& operator=(const RunnableSampler&) = delete;
  /// Ends sampling (joins the thread); idempotent.
  void stop();
  /// Samples taken so far (valid after stop()).
  int samples() const { return samples_; }
  /// The mean over the samples of the other processes' runnable threads, >= 0; -1 without a
  /// sample. Read after stop().
  double other_runnable() const { return samples_ > 0 ? sum_other_ / samples_ : -1.0; }
  /// The mean of this process's own runnable threads (the sampler included), -1 without a sample.
  double own_runnable() const { return samples_ > 0 ? sum_own_ / samples_ : -1.0; }

 private:
  void sample();
  std::atomic<bool> stop_{false};
  double sum_other_ = 0, sum_own_ = 0;
  int samples_ = 0;
  std::chrono::milliseconds period_;
  std::thread thread_;
};

}  // namespace embedscope::engine
