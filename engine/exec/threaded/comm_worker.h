#pragma once
// The comm worker of a rank: one thread that runs the rank's collectives one at a time, in the
// order they were queued (the comm lane of the session). Internal to the threaded executor.

#include <condition_variable>
#include <deque>
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
  /// future rethrows what it threw.
  std::future<void> submit(std::function<void()> fn) {
    std::packaged_task<void()> task(std::move(fn));
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
  std::thread thread_;
};


}  // namespace embedscope::engine::threaded
