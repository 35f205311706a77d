// Several ranks on one GPU: device-level CUPTI records (a cudaMalloc's MEMORY2 record, a copy or
// memset on no rank's stream, a cudaDeviceSynchronize) are charged to the rank whose thread made
// the call (CuptiDecoder::map_thread; the runtime record's threadId joins them by correlation id),
// not to the device's last rank (tester38 #5: a 4-rank run on one H200 had every cudaMalloc on
// rank 3). Hand-built records, hand-computed values; not run on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>

#include "embedscope/profiler/cupti/cupti_decode.h"
#include "embedscope/profiler/cupti/session_drain.h"
#include "embedscope/sessions/store/session.h"
#include "profiler_backend/activity_records.h"
#include "profiler_backend/gpu_trace_meta.h"

using namespace embedscope;
using profiler::CuptiDecoder;
using profiler::GpuOp;

namespace {
using RankRecords = embedscope::test_support::ActivityRecords;

// The runtime call `cbid` with correlation `corr`, made by OS thread `thread` at [start, start + 10).
void rank_call(RankRecords& b, uint32_t cbid, uint32_t corr, uint32_t thread, uint64_t start) {
  auto& a = b.add<CUpti_ActivityAPI>();
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = cbid;
  a.correlationId = corr;
  a.start = start;
  a.end = start + 10;
  a.threadId = thread;
}

// A cudaMalloc (`alloc`) or cudaFree's MEMORY2 record on device 0, no stream.
void rank_memory(RankRecords& b, bool alloc, uint64_t address, uint64_t bytes, uint64_t ts, uint32_t corr) {
  auto& m = b.add<CUpti_ActivityMemory4>();
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType =
      alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.address = address;
  m.bytes = bytes;
  m.timestamp = ts;
  m.deviceId = 0;
  m.streamId = CUPTI_INVALID_STREAM_ID;
  m.correlationId = corr;
}

// A copy of `bytes` on device 0's stream `stream` at [start, start + 100).
void rank_copy(RankRecords& b, uint32_t stream, uint32_t corr, uint64_t start, uint64_t bytes) {
  auto& m = b.add<CUpti_ActivityMemcpy6>();
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = bytes;
  m.start = start;
  m.end = start + 100;
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = stream;
  m.correlationId = corr;
}

// A cudaDeviceSynchronize's wait (context 1 = device 0, no stream) at [start, start + 50).
void rank_device_sync(RankRecords& b, uint32_t corr, uint64_t start) {
  auto& s = b.add<CUpti_ActivitySynchronization2>();
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  s.contextId = 1;
  s.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  s.correlationId = corr;
  s.start = start;
  s.end = start + 50;
}

// Ranks 0 and 1 on device 0 (the device's rank is the last mapped: 1); rank 0's thread 1000
// (compute stream 11), rank 1's thread 2000 (compute stream 12).
CuptiDecoder two_ranks_on_device0() {
  CuptiDecoder d;
  d.map_device(0, 0);
  d.map_device(0, 1);
  d.map_stream(0, 11, sessions::Lane::gpu_compute, 0);
  d.map_stream(0, 12, sessions::Lane::gpu_compute, 1);
  d.map_thread(1000, 0);
  d.map_thread(2000, 1);
  return d;
}

std::map<int64_t, int32_t> rank_by_address(const std::vector<sessions::MemoryEvent>& ev) {
  std::map<int64_t, int32_t> out;
  for (const auto& e : ev) out[e.address] = e.rank;
  return out;
}
}  // namespace

TEST(CuptiRankOfThread, EachRanksCudaMallocAndCopiesAreItsOwn) {
  CuptiDecoder d = two_ranks_on_device0();
  RankRecords b;
  // rank 0's arena (cudaMalloc inside the call, its runtime record after it)
  rank_memory(b, true, 0xA000, 650'117'120, 100, 41);
  rank_call(b, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 41, 1000, 95);
  rank_memory(b, true, 0xB000, 1 << 20, 200, 42);  // rank 1's
  rank_call(b, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 42, 2000, 195);
  rank_call(b, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 43, 1000, 295);  // rank 0 frees, its call first
  rank_memory(b, false, 0xA000, 650'117'120, 300, 43);
  rank_memory(b, true, 0xC000, 4096, 400, 44);  // the main thread (no rank's): the device's rank
  rank_call(b, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 44, 9999, 395);
  // copies on the legacy default stream (0: no rank's) by each rank's thread
  rank_copy(b, 0, 50, 500, 256);
  rank_call(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 50, 1000, 490);
  rank_copy(b, 0, 51, 700, 512);
  rank_call(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 51, 2000, 690);
  // a copy on rank 1's stream, called from rank 0's thread: the stream says whose
  rank_copy(b, 12, 52, 900, 1024);
  rank_call(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 52, 1000, 890);
  // device-wide waits: rank 0's thread, then the main thread's (teardown)
  rank_device_sync(b, 60, 1100);
  rank_call(b, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 60, 1000, 1095);
  rank_device_sync(b, 61, 1300);
  rank_call(b, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 61, 9999, 1295);
  d.add_buffer(b.data(), b.size());

  auto ops = d.take(false);
  ASSERT_EQ(ops.size(), 5u);
  std::sort(ops.begin(), ops.end(), [](const GpuOp& x, const GpuOp& y) { return x.op.start_ns < y.op.start_ns; });
  EXPECT_EQ(ops[0].op.bytes, 256);
  EXPECT_EQ(ops[0].op.rank, 0);  // rank 0's thread
  EXPECT_EQ(ops[1].op.bytes, 512);
  EXPECT_EQ(ops[1].op.rank, 1);  // rank 1's thread
  EXPECT_EQ(ops[2].op.bytes, 1024);
  EXPECT_EQ(ops[2].op.rank, 1);  // rank 1's stream, whoever called
  EXPECT_STREQ(ops[3].op.name, "cudaDeviceSynchronize");
  EXPECT_EQ(ops[3].op.lane, profiler::kSyncLane);
  EXPECT_EQ(ops[3].op.rank, 0);
  EXPECT_EQ(ops[3].launch_thread, 1000u);
  EXPECT_STREQ(ops[4].op.name, "cudaDeviceSynchronize");
  EXPECT_EQ(ops[4].op.rank, 1);  // no rank's thread: the device's rank
  EXPECT_EQ(d.launches_waiting(), 0u);  // every call joined its record

  const auto ev = d.take_memory_events();
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].address, 0xA000);
  EXPECT_EQ(ev[0].rank, 0);
  EXPECT_EQ(ev[0].action, profiler::kMemoryAllocAction);
  EXPECT_EQ(ev[0].size, 650'117'120);
  EXPECT_EQ(ev[1].address, 0xB000);
  EXPECT_EQ(ev[1].rank, 1);
  EXPECT_EQ(ev[2].address, 0xA000);
  EXPECT_EQ(ev[2].rank, 0);
  EXPECT_EQ(ev[2].action, profiler::kMemoryFreeAction);
  EXPECT_EQ(ev[3].address, 0xC000);
  EXPECT_EQ(ev[3].rank, 1);
  // the main thread's cudaMalloc and cudaDeviceSynchronize: the two charged to the device's rank
  EXPECT_EQ(d.stats().device_rank_fallbacks, 2);
  // and the session says so (cupti_device_rank_fallbacks)
  EXPECT_EQ(test_support::gpu_trace_meta(d.stats(), "cupti_device_rank_fallbacks"), "2");
}

// cudaMalloc's MEMORY2 record can reach a drain before its runtime record (another buffer):
// the event waits one take_memory_events() for its thread, then goes to the device's rank.
TEST(CuptiRankOfThread, AnAllocationWaitsOneTakeForItsCall) {
  CuptiDecoder d = two_ranks_on_device0();
  RankRecords first, second;
  rank_memory(first, true, 0xA000, 4096, 100, 41);  // rank 0's; its call in the next buffer
  rank_memory(first, true, 0xB000, 8192, 200, 42);  // a call CUPTI never reports
  d.add_buffer(first.data(), first.size());
  EXPECT_TRUE(d.take_memory_events().empty());
  rank_call(second, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 41, 1000, 95);
  d.add_buffer(second.data(), second.size());
  const auto ev = d.take_memory_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(rank_by_address(ev), (std::map<int64_t, int32_t>{{0xA000, 0}, {0xB000, 1}}));
  EXPECT_EQ(d.stats().device_rank_fallbacks, 1);
  EXPECT_EQ(d.launches_waiting(), 0u);  // the late cudaMalloc joined, not kept

  // take(true) (the tracer's stop) lets every waiting event out with the next take
  rank_memory(first, true, 0xC000, 64, 300, 43);
  CuptiDecoder e = two_ranks_on_device0();
  e.add_buffer(first.data(), first.size());
  e.take(true);
  EXPECT_EQ(e.take_memory_events().size(), 3u);
}

// Without map_thread (one rank per GPU; the process-per-rank executor) nothing waits: the
// device's rank at once, as before.
TEST(CuptiRankOfThread, WithoutThreadsTheDeviceSaysAtOnce) {
  CuptiDecoder d;
  d.map_device(0, 3);
  RankRecords b;
  rank_memory(b, true, 0xA000, 4096, 100, 41);
  rank_copy(b, 0, 50, 150, 64);  // context 1 is device 0's
  rank_call(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 50, 1000, 140);
  rank_device_sync(b, 60, 300);
  d.add_buffer(b.data(), b.size());
  const auto ev = d.take_memory_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].rank, 3);
  const auto ops = d.take(false);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].op.rank, 3);
  EXPECT_EQ(ops[1].op.rank, 3);
  EXPECT_EQ(ops[1].op.lane, profiler::kSyncLane);
  // the calls that come after their records are not kept
  RankRecords late;
  rank_call(late, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 41, 1000, 95);
  rank_call(late, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 60, 1000, 195);
  d.add_buffer(late.data(), late.size());
  EXPECT_EQ(d.launches_waiting(), 0u);
  EXPECT_TRUE(profiler::makes_activity("cudaDeviceSynchronize_v3020"));
  EXPECT_TRUE(profiler::makes_activity("cudaStreamSynchronize_v3020"));
}

namespace {
// The CuptiTracer's part in a SessionDrain, played by a decoder fed hand-built buffers.
class ThreadRankSource final : public profiler::GpuRecordSource {
 public:
  CuptiDecoder dec = two_ranks_on_device0();
  std::vector<GpuOp> drain() override { return dec.take(false); }
  std::vector<GpuOp> stop() override { return dec.take(true); }
  std::vector<sessions::MemoryEvent> take_memory_events() override { return dec.take_memory_events(); }
  int64_t join_collectives(std::vector<GpuOp>& ops, const std::vector<sessions::CollectiveRecord>& records) override {
    return dec.join_collectives(ops, records);
  }
};
}  // namespace

// End to end through the session: two ranks on one GPU, each rank's setup cudaMalloc is a
// memory event of that rank in the session (setup's step, -1).
TEST(CuptiRankOfThread, TheSessionHasEachRanksAllocationsOnItsRank) {
  const auto path = std::filesystem::temp_directory_path() / ("es_cupti_rank_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  ThreadRankSource src;
  {
    sessions::SessionWriter w(path.string());
    profiler::SessionDrain drain(src, &w, {0, 1}, -1, nullptr);
    RankRecords setup;
    rank_memory(setup, true, 0xA000, 650'117'120, 100, 41);
    rank_call(setup, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 41, 1000, 95);
    rank_memory(setup, true, 0xB000, 650'117'120, 150, 42);
    rank_call(setup, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 42, 2000, 145);
    src.dec.add_buffer(setup.data(), setup.size());
    drain.step_ended(0, 0, 1000, 2000);
    drain.step_ended(1, 0, 1000, 2000);
    drain.finish();
    EXPECT_EQ(drain.error(), "");
    EXPECT_EQ(drain.events_written(), 2);
    w.close("complete");
  }
  sessions::SessionReader r(path.string());
  std::map<int32_t, int64_t> bytes_of_rank;
  for (const auto& e : r.memory_events()) {
    EXPECT_EQ(e.step, -1);
    bytes_of_rank[e.rank] += e.size;
  }
  EXPECT_EQ(bytes_of_rank, (std::map<int32_t, int64_t>{{0, 650'117'120}, {1, 650'117'120}}));
  std::filesystem::remove(path);
}
