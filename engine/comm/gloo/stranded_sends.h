#pragma once
// Sends that a failed Gloo TCP pair leaves waiting (internal to the engine).
//
// When a pair's connection fails (the peer was killed, or hard-closed its connections after a
// failure of its own), Gloo's tcp::Pair::signalException wakes the waiters of the pair's bound
// buffers, of its pending sends and receives, and of the ops queued for writing that carry a
// *bound* buffer - but not the queued ops of *unbound* buffers (gloo/transport/tcp/pair.cc,
// "Loop through posted send operations", at 5b14351 of Debian's libgloo-dev and still at
// upstream's cc44198). A collective whose send was queued on that pair - a ring's next hop that
// stopped reading, its socket buffers full - then waits out its whole collective timeout and is
// reported as a timeout although the connection broke at once (tester36 D8, flaky in CI under
// load). The watch below wakes such sends with the pair's own error.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace gloo {
class Context;
}

namespace embedscope::engine {

/// One pass over `ctx`'s TCP pairs: for every pair that has failed (its exception is set), the
/// unbound buffers of the sends still queued on it get that exception, so that their
/// waitSend() throws it at once instead of timing out. Pairs of other transports and
/// unconnected pairs are skipped. Returns the number of buffers woken (a buffer already
/// destroyed is not counted). Takes each pair's mutex briefly, as Gloo's device loop does.
int wake_stranded_sends(gloo::Context& ctx) noexcept;

/// Runs wake_stranded_sends on `ctx` every `period` while a collective is in flight (between
/// begin() and end()), on a thread of its own started by the first begin() and joined by the
/// destructor. Idle (no polling) while no collective is in flight. Thread-safe.
class StrandedSendWatch {
 public:
  explicit StrandedSendWatch(std::shared_ptr<gloo::Context> ctx,
                             std::chrono::milliseconds period = std::chrono::milliseconds(10));
  ~StrandedSendWatch();
  StrandedSendWatch(const StrandedSendWatch&) = delete;
  StrandedSendWatch& operator=(const StrandedSendWatch&) = delete;

  /// A collective of this context started: poll until end().
  void begin();
  /// The collective returned or threw: stop polling.
  void end() noexcept;
  /// Buffers woken so far (for tests and diagnostics): a collective woken by the watch sees
  /// its buffer counted once its end() has returned.
  int woken() const noexcept;

 private:
  void loop();

  std::shared_ptr<gloo::Context> ctx_;
  std::chrono::milliseconds period_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  bool in_flight_ = false;
  bool stop_ = false;
  int woken_ = 0;
  std::thread thread_;
};

}  // namespace embedscope::engine
