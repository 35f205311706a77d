// How long this process did not run (pause_watch.h).
#include "pause_watch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

namespace embedscope::engine {

namespace {
constexpr int64_t kTickNs = 10'000'000;       // the ticker's sleep
constexpr int64_t kMinPauseNs = 100'000'000;  // a gap longer than this between two wake-ups is a pause
constexpr size_t kKeptPauses = 256;           // the newest pauses kept
}  // namespace

int64_t paused_within(std::vector<Pause> pauses, int64_t from_ns, int64_t to_ns) {
  if (to_ns <= from_ns) return 0;
  std::sort(pauses.begin(), pauses.end(), [](const Pause& a, const Pause& b) { return a.begin_ns < b.begin_ns; });
  int64_t total = 0, covered_to = from_ns;  // [from_ns, covered_to) is counted already
  for (const Pause& p : pauses) {
    const int64_t b = std::max(p.begin_ns, covered_to), e = std::min(p.end_ns, to_ns);
    if (e > b) {
      total += e - b;
      covered_to = e;
    }
  }
  return total;
}

std::string self_paused_text(const std::string& head, int64_t paused_ns, int64_t timeout_ms, const std::string& what) {
  return fmt::format("{} failed: this rank's own process did not run for {:.1f} s while inside it (stopped - SIGSTOP, "
                     "Ctrl-Z, a debugger - or not scheduled), longer than the {} ms collective timeout: its peers gave "
                     "up waiting for it, no peer failed first ({})",
                     head, static_cast<double>(paused_ns) / 1e9, timeout_ms, what);
}

struct PauseWatch::State {
  pid_t pid = getpid();  // the process whose ticker fills it (a forked child has no ticker)
  std::mutex mu;
  std::deque<Pause> pauses;
  std::atomic<int64_t> last_tick{0};
};

int64_t PauseWatch::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

PauseWatch::PauseWatch() : state_(new State) { state_->last_tick = now_ns(); }

void PauseWatch::start() {
  State* s = state_;
  std::thread([s] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(kTickNs));
      const int64_t now = now_ns(), prev = s->last_tick.load();
      if (now - prev > kMinPauseNs) {
        std::lock_guard<std::mutex> lock(s->mu);
        s->pauses.push_back({prev + kTickNs, now});
        if (s->pauses.size() > kKeptPauses) s->pauses.pop_front();
      }
      s->last_tick = now;
    }
  }).detach();
}

PauseWatch& PauseWatch::instance() {
  // never destroyed: its ticker runs until the process exits. A child forked after the ticker
  // started has the watch but no ticker: it starts its own (the parent's is kept, unused).
  static std::atomic<PauseWatch*> current{nullptr};
  static std::atomic<PauseWatch*> inherited{nullptr};  // the parent's, kept reachable (no leak report)
  PauseWatch* w = current.load();
  while (!w || w->state_->pid != getpid()) {
    auto* fresh = new PauseWatch;  // its ticker starts only once it is the process's watch
    if (current.compare_exchange_strong(w, fresh)) {
      if (w) inherited.store(w);
      fresh->start();
      return *fresh;
    }
    // another thread installed one first (rank threads connecting at once): use it
    delete fresh->state_;
    delete fresh;
  }
  return *w;
}

int64_t PauseWatch::paused_ns(int64_t from_ns, int64_t to_ns) {
  State* s = state_;
  if (s->pid != getpid()) return 0;  // a watch inherited over fork(): no ticker here, nothing known
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (s->last_tick.load() < to_ns && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<Pause> v;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    v.assign(s->pauses.begin(), s->pauses.end());
  }
  if (const int64_t last = s->last_tick.load(); last < to_ns && to_ns - last > kMinPauseNs)
    v.push_back({last + kTickNs, to_ns});  // the ticker has not run since: the gap so far
  return paused_within(std::move(v), from_ns, to_ns);
}

}  // namespace embedscope::engine
