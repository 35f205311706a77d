// CompletionWatchdog (comm/completion_watchdog.h): blocking waits with a watchdog thread.
#include "embedscope/engine/comm/completion_watchdog.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace embedscope::engine {

Completion watchdog_verdict(int64_t now_ns, int64_t issued_ns, int64_t timeout_ns, bool async_error) {
  if (async_error) return Completion::failed;
  return now_ns - issued_ns >= timeout_ns ? Completion::timed_out : Completion::done;
}

CompletionWatchdog::CompletionWatchdog(Hooks hooks, int64_t check_interval_ns)
    : hooks_(std::move(hooks)), interval_ns_(check_interval_ns) {
  if (!hooks_.now_ns || !hooks_.async_error || !hooks_.abort)
    throw std::invalid_argument("CompletionWatchdog: now_ns, async_error and abort are required");
  if (interval_ns_ <= 0)
    throw std::invalid_argument("CompletionWatchdog: check interval " + std::to_string(interval_ns_) + " ns <= 0");
}

CompletionWatchdog::~CompletionWatchdog() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t CompletionWatchdog::aborts() const {
  std::lock_guard lock(m_);
  return aborts_;
}

void CompletionWatchdog::run() {
  std::unique_lock lock(m_);
  while (!stop_) {
    const bool watching =
        std::any_of(armed_.begin(), armed_.end(), [](const auto& kv) { return !kv.second.decided; });
    if (!watching) {
      cv_.wait(lock);
      continue;
    }
    lock.unlock();  // the hooks may take time (ncclCommGetAsyncError): not under the lock
    const int64_t now = hooks_.now_ns();
    const bool error = hooks_.async_error();
    lock.lock();
    bool fire = false;
    int64_t next = interval_ns_;
    for (auto& [id, a] : armed_) {
      if (a.decided) continue;
      const Completion v = watchdog_verdict(now, a.issued_ns, a.timeout_ns, error);
      if (v != Completion::done) {
        fire = true;
        a.decided = true;
        a.how = v;
        a.decided_ns = now;
      } else {
        next = std::min(next, a.issued_ns + a.timeout_ns - now);
      }
    }
    if (fire) {  // the communicator goes: every other wait on it ends too
      for (auto& [id, a] : armed_)
        if (!a.decided) a.decided = true, a.how = Completion::aborted, a.decided_ns = now;
      fired_ = true;
      ++aborts_;
      lock.unlock();
      hooks_.abort();  // the blocked waits return
      lock.lock();
      continue;
    }
    cv_.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(next, 1)));
  }
}

CompletionOutcome CompletionWatchdog::wait(const std::function<void()>& block, int64_t issued_ns, int64_t timeout_ns) {
  uint64_t id = 0;
  {
    std::lock_guard lock(m_);
    if (fired_) return {Completion::aborted, hooks_.now_ns()};
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    id = next_id_++;
    Armed a;
    a.issued_ns = issued_ns;
    a.timeout_ns = timeout_ns;
    armed_.emplace(id, a);
  }
  cv_.notify_all();
  struct Disarm {  // also when `block` throws
    CompletionWatchdog& w;
    uint64_t id;
    Armed taken{};
    Armed take() {
      std::lock_guard lock(w.m_);
      auto it = w.armed_.find(id);
      if (it != w.armed_.end()) {
        taken = it->second;
        w.armed_.erase(it);
      }
      id = UINT64_MAX;
      return taken;
    }
    ~Disarm() {
      if (id != UINT64_MAX) take();
    }
  } disarm{*this, id};
  block();
  const int64_t end = hooks_.now_ns();  // the completion, as soon as the blocked thread saw it
  const Armed a = disarm.take();
  if (a.decided) return {a.how, a.decided_ns};
  return {Completion::done, end};
}

}  // namespace embedscope::engine
