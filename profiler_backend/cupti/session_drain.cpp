#include "embedscope/profiler/cupti/session_drain.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <utility>

namespace embedscope::profiler {

SessionDrain::SessionDrain(GpuRecordSource& source, sessions::SessionWriter* session, std::vector<int32_t> ranks,
                           int64_t setup_step, RecordsSince records, Mode mode)
    : source_(source), session_(session), records_(std::move(records)), placer_(std::move(ranks), setup_step) {
  if (mode == Mode::background) background_ = std::thread([this] { background_loop(); });
}

SessionDrain::~SessionDrain() { stop_background(); }

void SessionDrain::stop_background() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (background_.joinable()) background_.join();
}

void SessionDrain::background_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return due_ || stopping_; });
    if (!due_) return;  // stopping, nothing due
    due_ = false;
    lock.unlock();
    drain(false);
    lock.lock();
  }
}

void SessionDrain::step_ended(int32_t rank, int64_t step, int64_t start_ns, int64_t end_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    try {
      if (!placer_.close_step(rank, step, start_ns, end_ns)) return;
    } catch (const std::exception& e) {  // a rank the drain does not know: recorded, never thrown at the rank
      if (error_.empty()) error_ = e.what();
      return;
    }
    if (failed_) return;
    if (background_.joinable()) {
      due_ = true;
      wake_.notify_one();
      return;
    }
  }
  drain(false);
}

void SessionDrain::finish(const std::map<int32_t, RunningStep>& running) {
  stop_background();  // the drain due, if any, is done first
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    for (const auto& [rank, run] : running) placer_.set_running(rank, run);
  }
  drain(true);
}

void SessionDrain::drain(bool final) {
  std::lock_guard<std::mutex> one_drain(drain_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!final && (failed_ || finished_)) return;  // a step-end drain after a failure or finish()
  }
  std::vector<GpuOp> got;
  std::vector<sessions::MemoryEvent> memory;
  std::string failure;
  try {
    got = final ? source_.stop() : source_.drain();
    memory = source_.take_memory_events();
  } catch (const std::exception& e) {
    failure = std::string(final ? "CUPTI drain at the end failed: " : "CUPTI drain at a step end failed: ") + e.what();
    if (final) {
      try {  // what was decoded before the failure
        memory = source_.take_memory_events();
      } catch (const std::exception&) {
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure.empty()) {
    failed_ = true;
    if (error_.empty()) error_ = failure;
    if (!final) return;
  }
  ++drains_;
  std::vector<GpuOp> ready = placer_.place(std::move(got), final);
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (const auto& g : ready)  // NCCL kernels, and the intra-device communicator's copies (join_collectives)
    if (g.nccl || (g.op.lane == sessions::Lane::gpu_comm && g.op.category == sessions::OpCategory::comm))
      earliest = std::min(earliest, g.op.start_ns);
  if (earliest != std::numeric_limits<int64_t>::max() && records_) {
    try {
      source_.join_collectives(ready, records_(earliest));
    } catch (const std::exception& e) {
      if (error_.empty()) error_ = std::string("joining NCCL kernels with their collectives failed: ") + e.what();
    }
  }
  std::vector<sessions::MemoryEvent> events = placer_.place(std::move(memory), final);
  ops_written_ += static_cast<int64_t>(ready.size());
  events_written_ += static_cast<int64_t>(events.size());
  if (!session_) return;
  std::vector<sessions::OpEvent> ops;
  ops.reserve(ready.size());
  for (const auto& g : ready) ops.push_back(g.op);
  if (!ops.empty()) session_->add_ops(ops);
  if (!events.empty()) session_->add_memory_events(events);
}

std::string SessionDrain::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

int64_t SessionDrain::drains() const {
  std::lock_guard<std::mutex> lock(mu_);
  return drains_;
}

int64_t SessionDrain::ops_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_written_;
}

int64_t SessionDrain::events_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_written_;
}

}  // namespace embedscope::profiler
