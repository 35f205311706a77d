#include "embedscope/profiler/cupti/cupti_tracer.h"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include <cupti.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace embedscope::profiler {

namespace {
std::atomic<CuptiTracer*> g_tracer{nullptr};

constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_MEMORY2,           CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};

void check(CUptiResult rc, const char* call) {
  if (rc == CUPTI_SUCCESS) return;
  const char* s = nullptr;
  cuptiGetResultString(rc, &s);
  throw std::runtime_error(std::string("CUPTI: ") + call + " failed: " + (s ? s : std::to_string(rc)));
}
}  // namespace

void CuptiTracer::on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  CuptiTracer* t = g_tracer.load();
  *max_records = 0;
  *buffer = nullptr;
  *size = 0;
  if (!t) return;  // declining the request: CUPTI drops and counts the records
  {
    std::lock_guard<std::mutex> lock(t->queue_mu_);
    if (!t->free_buffers_.empty()) {
      *buffer = t->free_buffers_.back();
      t->free_buffers_.pop_back();
    }
  }
  // malloc's alignment (16) meets CUPTI's 8-byte requirement for activity buffers.
  if (!*buffer) *buffer = static_cast<uint8_t*>(std::malloc(t->options_.buffer_bytes));
  if (*buffer) *size = t->options_.buffer_bytes;
}

void CuptiTracer::on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CuptiTracer* t = g_tracer.load();
  if (!t) {
    std::free(buffer);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(t->queue_mu_);
    t->completed_.emplace_back(buffer, valid);
  }
  t->queue_cv_.notify_one();
}

ClockCalibration CuptiTracer::calibrate() const {
  const int64_t before = clock_.now_ns();
  uint64_t gpu = 0;
  check(cuptiGetTimestamp(&gpu), "cuptiGetTimestamp");
  const int64_t after = clock_.now_ns();
  return ClockCalibration::from_sample(before, gpu, after);
}

CuptiTracer::CuptiTracer(const RunClock& clock, Options options) : clock_(clock), options_(options) {
  CuptiTracer* expected = nullptr;
  if (!g_tracer.compare_exchange_strong(expected, this))
    throw std::logic_error("CuptiTracer: another CuptiTracer is running in this process");
  try {
    // threadId = the OS thread id (gettid), as map_thread's callers know it (the default,
    // pthread_self(), does not fit the records' 32 bits)
    check(cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM), "cuptiSetThreadIdType");
    check(cuptiActivityRegisterCallbacks(&on_buffer_requested, &on_buffer_completed), "cuptiActivityRegisterCallbacks");
    for (CUpti_ActivityKind k : kKinds) check(cuptiActivityEnable(k), "cuptiActivityEnable");
    start_clock_ = end_clock_ = calibrate();
  } catch (...) {
    for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
    g_tracer.store(nullptr);
    throw;
  }
  decoder_.set_clock(start_clock_);
  collector_ = std::thread([this] { collector_loop(); });
}

CuptiTracer::~CuptiTracer() {
  try {
    stop();
  } catch (...) {
  }
  for (uint8_t* b : free_buffers_) std::free(b);
}

void CuptiTracer::collector_loop() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  while (!stopping_) {
    if (completed_.empty()) {
      if (queue_cv_.wait_for(lock, options_.flush_period) == std::cv_status::timeout && !stopping_) {
        lock.unlock();
        cuptiActivityFlushAll(0);  // hands over the buffers whose records are complete
        lock.lock();
      }
      continue;
    }
    lock.unlock();
    decode_queued();
    lock.lock();
  }
}

void CuptiTracer::decode_queued() {
  std::lock_guard<std::mutex> decode_lock(decode_mu_);
  for (;;) {
    std::pair<uint8_t*, size_t> b;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      if (completed_.empty()) break;
      b = completed_.front();
      completed_.pop_front();
    }
    decoder_.add_buffer(b.first, b.second);
    std::lock_guard<std::mutex> lock(queue_mu_);
    free_buffers_.push_back(b.first);
  }
  count_dropped();
}

void CuptiTracer::count_dropped() {
  size_t n = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &n) == CUPTI_SUCCESS) dropped_ += static_cast<int64_t>(n);
}

void CuptiTracer::map_device(int device, int rank) {
  std::lock_guard<std::mutex> lock(decode_mu_);
  decoder_.map_device(static_cast<uint32_t>(device), rank);
}

void CuptiTracer::map_thread(uint32_t thread, int rank) {
  std::lock_guard<std::mutex> lock(decode_mu_);
  decoder_.map_thread(thread, rank);
}

uint32_t CuptiTracer::current_thread_id() { return static_cast<uint32_t>(::syscall(SYS_gettid)); }

void CuptiTracer::map_stream(int device, cudaStream_t stream, sessions::Lane lane, int rank) {
  uint32_t id = 0;
  check(cuptiGetStreamIdEx(nullptr, reinterpret_cast<CUstream>(stream), 0, &id), "cuptiGetStreamIdEx");
  std::lock_guard<std::mutex> lock(decode_mu_);
  decoder_.map_stream(static_cast<uint32_t>(device), id, lane, rank);
}

std::vector<GpuOp> CuptiTracer::drain() {
  if (!stopped_) check(cuptiActivityFlushAll(0), "cuptiActivityFlushAll");
  decode_queued();
  std::lock_guard<std::mutex> lock(decode_mu_);
  return decoder_.take(false);
}

std::vector<GpuOp> CuptiTracer::stop() {
  if (!stopped_) {
    for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
    // the collector thread is joined whatever fails: a running std::thread must not be destroyed
    std::exception_ptr error;
    try {
      check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
      end_clock_ = calibrate();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      stopping_ = true;
    }
    queue_cv_.notify_one();
    collector_.join();
    decode_queued();
    g_tracer.store(nullptr);
    stopped_ = true;
    if (error) std::rethrow_exception(error);
  }
  std::lock_guard<std::mutex> lock(decode_mu_);
  return decoder_.take(true);
}

std::vector<sessions::MemoryEvent> CuptiTracer::take_memory_events() {
  std::lock_guard<std::mutex> lock(decode_mu_);
  return decoder_.take_memory_events();
}

int64_t CuptiTracer::join_collectives(std::vector<GpuOp>& ops, const std::vector<sessions::CollectiveRecord>& records) {
  std::lock_guard<std::mutex> lock(decode_mu_);
  return decoder_.join_collectives(ops, records);
}

int64_t CuptiTracer::dropped() const {
  std::lock_guard<std::mutex> lock(decode_mu_);
  return dropped_;
}

DecodeStats CuptiTracer::stats() const {
  std::lock_guard<std::mutex> lock(decode_mu_);
  return decoder_.stats();
}

void CuptiTracer::write_metadata(sessions::SessionWriter& w) const {
  write_gpu_trace_metadata(w, dropped(), stats(), start_clock_, end_clock_);
}

}  // namespace embedscope::profiler
