#include "embedscope/engine/comm/flight_recorder.h"

#include <chrono>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

namespace {
constexpr size_t kDefaultCapacity = 2000;  // PyTorch's TORCH_FR_BUFFER_SIZE default

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

size_t flight_recorder_default_capacity() {
  static const size_t n = [] {  // a throw leaves it unset: every later call throws the same
    const char* v = std::getenv("EMBEDSCOPE_FR_BUFFER_SIZE");
    if (!v || !*v) return kDefaultCapacity;  // unset or empty (VAR= cmd)
    const std::string text = v;
    size_t i = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    const bool digits = !text.empty() && i == text.size() && i <= 9;  // at most 999,999,999
    const long long x = digits ? std::stoll(text) : -1;
    if (x < 0 || x > static_cast<long long>(kMaxFlightRecorderCapacity))
      throw SpecError(fmt::format(
          "EMBEDSCOPE_FR_BUFFER_SIZE={}: give the entries each rank's flight recorder keeps, a whole number from 0 "
          "(off) to {} (default {}; each entry takes about 400 bytes a rank, allocated up front)",
          text, kMaxFlightRecorderCapacity, kDefaultCapacity));
    return static_cast<size_t>(x);
  }();
  return n;
}

FlightRecorder::FlightRecorder(int rank, size_t capacity, const profiler::RunClock* clock)
    : rank_(rank), clock_(clock), origin_ns_(steady_ns()), ring_(capacity) {}

int64_t FlightRecorder::now_ns() const { return clock_ ? clock_->now_ns() : steady_ns() - origin_ns_; }

sessions::FlightRecord* FlightRecorder::find(Id id) {
  if (id < 0 || ring_.empty() || id + static_cast<int64_t>(ring_.size()) < next_id_) return nullptr;  // overwritten
  return &ring_[static_cast<size_t>(id) % ring_.size()];
}

FlightRecorder::Id FlightRecorder::scheduled(const std::string& group, std::span<const int> members,
                                             uint64_t sequence, const char* op, const char* name, const char* dtype,
                                             int64_t input_elements, int64_t output_elements, int64_t timeout_ms) {
  if (ring_.empty()) return -1;
  const int64_t t = now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  const Id id = next_id_++;
  sessions::FlightRecord& e = ring_[static_cast<size_t>(id) % ring_.size()];
  e.rank = rank_;
  e.record_id = id;
  e.group = group;
  e.members = fmt::format("{}", fmt::join(members, ","));
  e.sequence = sequence;
  e.op = op;
  e.name = name;
  e.dtype = dtype;
  e.input_elements = input_elements;
  e.output_elements = output_elements;
  e.step = step_;
  e.state = "scheduled";
  e.time_created_ns = t;
  e.time_started_ns = -1;
  e.time_completed_ns = -1;
  e.timeout_ms = timeout_ms;
  return id;
}

void FlightRecorder::started(Id id) {
  const int64_t t = now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto* e = find(id)) {
    e->state = "started";
    e->time_started_ns = t;
  }
}

void FlightRecorder::completed(Id id) {
  const int64_t t = now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto* e = find(id)) {
    e->state = "completed";
    e->time_completed_ns = t;
  }
}

void FlightRecorder::failed(Id id) noexcept {
  try {
    const int64_t t = now_ns();
    std::lock_guard<std::mutex> lock(mu_);
    if (auto* e = find(id); e && e->state != "completed") e->time_completed_ns = t;
  } catch (...) {  // a mutex that cannot be locked: the entry keeps no failure time
  }
}

void FlightRecorder::set_step(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
}

std::vector<sessions::FlightRecord> FlightRecorder::dump(int32_t dump, const std::string& reason) const {
  const int64_t t = now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<sessions::FlightRecord> out;
  if (ring_.empty()) return out;
  const int64_t n = static_cast<int64_t>(ring_.size());
  const int64_t first = next_id_ > n ? next_id_ - n : 0;
  out.reserve(static_cast<size_t>(next_id_ - first));
  for (int64_t id = first; id < next_id_; ++id) {
    sessions::FlightRecord e = ring_[static_cast<size_t>(id % n)];
    e.dump = dump;
    e.reason = reason;
    e.dump_time_ns = t;
    e.ring_dropped = first;
    out.push_back(std::move(e));
  }
  return out;
}

int64_t FlightRecorder::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto n = static_cast<int64_t>(ring_.size());
  return next_id_ > n ? next_id_ - n : 0;
}

int64_t FlightRecorder::recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_id_;
}

}  // namespace embedscope::engine
