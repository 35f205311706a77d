#pragma once
// Carries out flight recorder dump requests (TrainerOptions::flight_dump, set by a signal
// handler, which may neither lock nor allocate) on a thread of its own while a run's ranks run.
// Internal to the threaded executors.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "embedscope/engine/exec/run.h"

namespace embedscope::engine::threaded {

class FlightDumpWatcher {
 public:
  /// Polls `request` every 20 ms until stop(); each change of its count calls
  /// `dump_all(flight_dump_reason(signal))` on the watcher's thread. A null `request` watches
  /// nothing (no thread).
  FlightDumpWatcher(const FlightDumpRequest* request, std::function<void(const std::string&)> dump_all)
      : request_(request), dump_all_(std::move(dump_all)) {
    if (!request_) return;
    seen_ = request_->count.load();
    thread_ = std::thread([this] { loop(); });
  }
  ~FlightDumpWatcher() { stop(); }
  FlightDumpWatcher(const FlightDumpWatcher&) = delete;
  FlightDumpWatcher& operator=(const FlightDumpWatcher&) = delete;
  /// Ends the watcher; a request not yet carried out is carried out before it returns. Idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (!thread_.joinable()) return;
    thread_.join();
    // a request that came in the last poll interval (a SIGTERM that ended the run) is carried out
    if (const int n = request_->count.load(); n != seen_) {
      seen_ = n;
      dump_all_(flight_dump_reason(request_->signal.load()));
    }
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(20), [&] { return done_; })) {
      const int n = request_->count.load();
      if (n == seen_) continue;
      seen_ = n;
      lock.unlock();
      dump_all_(flight_dump_reason(request_->signal.load()));
      lock.lock();
    }
  }
  const FlightDumpRequest* request_;
  std::function<void(const std::string&)> dump_all_;
  int seen_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace embedscope::engine::threaded
