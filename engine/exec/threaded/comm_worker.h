#pragma once
// The comm worker of a rank: one thread that runs the rank's collectives one at a time, in the
// order they were queued (the comm lane of the session). Internal to the threaded executor.
// Once a job has failed, every job queued after it fails with the same exception without running:
// the collectives behind a failed one would run on a group that failure broke (a timed-out
// all-reduce closes the rank's connections, and the gradient all-to-all queued behind it then
// failed at once with "a peer's connection broke"), and the rank, waiting on that later job
// first, ended "crashed" instead of "hang" (Fixc47LaunchStop, under load).

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace embedscope::engine::threaded {

class CommWorker {
 public:
  CommWorker() : thread_([this] { loop(); }) {}
  ~CommWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  /// Queues `fn` on the comm thread (jobs run one at a time, in the order queued); the
  /// future rethrows what it threw, or, where an earlier job failed, that job's exception (`fn`
  /// is then not run).
  std::future<void> submit(std::function<void()> fn) {
    std::packaged_task<void()> task([this, fn = std::move(fn)] {
      if (failed_) std::rethrow_exception(failed_);  // failed_: the comm thread's own
      try {
        fn();
      } catch (...) {
        failed_ = std::current_exception();
        throw;
      }
    });
    auto fut = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_all();
    return fut;
  }
  /// Runs `fn` on the comm thread and waits for it.
  void run(std::function<void()> fn) { submit(std::move(fn)).get(); }

 private:
  void loop() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stop_ = false;
  std::exception_ptr failed_;  // the first job's failure; read and written on the comm thread only
  std::thread thread_;
};


}  // namespace embedscope::engine::threaded
