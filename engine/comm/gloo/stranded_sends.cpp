#include "comm/gloo/stranded_sends.h"

#include <gloo/context.h>
#include <gloo/transport/tcp/pair.h>            // its gloo/common/memory.h: comm/gloo/vendor/
#include <gloo/transport/tcp/unbound_buffer.h>

namespace embedscope::engine {
namespace {

using TcpPair = gloo::transport::tcp::Pair;
using TcpBuffer = gloo::transport::tcp::UnboundBuffer;

// Gloo's members reached through pointers to members formed in derived classes, which C++
// allows for protected members (as PairWaker in process_group.cpp); never instantiated.
struct PairInternals : TcpPair {
  static std::mutex& mutex(TcpPair& p) { return p.*(&PairInternals::m_); }
  static std::exception_ptr& error(TcpPair& p) { return p.*(&PairInternals::ex_); }
  static std::deque<gloo::transport::tcp::Op>& queued(TcpPair& p) { return p.*(&PairInternals::tx_); }
};
struct BufferInternals : TcpBuffer {
  static void signal(TcpBuffer& b, std::exception_ptr ex) { (b.*(&BufferInternals::signalException))(std::move(ex)); }
};

}  // namespace

int wake_stranded_sends(gloo::Context& ctx) noexcept {
  int woken = 0;
  for (int i = 0; i < ctx.size; ++i) {
    if (i == ctx.rank) continue;
    try {
      auto& pair = ctx.getPair(i);
      auto* tcp = dynamic_cast<TcpPair*>(pair.get());
      if (tcp == nullptr) continue;
      // the order Gloo's device loop takes: the pair's mutex, then a buffer's
      std::lock_guard<std::mutex> lock(PairInternals::mutex(*tcp));
      const std::exception_ptr ex = PairInternals::error(*tcp);
      if (!ex) continue;
      for (auto& op : PairInternals::queued(*tcp)) {
        if (!op.ubuf) continue;
        gloo::NonOwningPtr<TcpBuffer> buf(op.ubuf);
        if (!buf) continue;
        BufferInternals::signal(*buf.operator->(), ex);
        ++woken;
      }
    } catch (const std::exception&) {  // a pair not set up (getPair enforces its range): nothing queued
    }
  }
  return woken;
}

StrandedSendWatch::StrandedSendWatch(std::shared_ptr<gloo::Context> ctx, std::chrono::milliseconds period)
    : ctx_(std::move(ctx)), period_(period) {}

StrandedSendWatch::~StrandedSendWatch() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StrandedSendWatch::begin() {
  std::lock_guard<std::mutex> lock(m_);
  in_flight_ = true;
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  cv_.notify_all();
}

void StrandedSendWatch::end() noexcept {
  std::lock_guard<std::mutex> lock(m_);
  in_flight_ = false;
}

int StrandedSendWatch::woken() const noexcept {
  std::lock_guard<std::mutex> lock(m_);
  return woken_;
}

void StrandedSendWatch::loop() {
  std::unique_lock<std::mutex> lock(m_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || in_flight_; });
    if (stop_) return;
    if (cv_.wait_for(lock, period_, [&] { return stop_; })) return;
    // under the watch's lock: a woken collective's end() returns after the count is in
    if (in_flight_) woken_ += wake_stranded_sends(*ctx_);
  }
}

}  // namespace embedscope::engine
