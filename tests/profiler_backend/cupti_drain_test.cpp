// Issue 14's CUPTI pieces without a device: the per-step drain's placement of GPU records in
// steps (StepDrain), the bounded runtime-launch table, synchronization waits on their own lane
// and MEMORY2 records as memory events of the stream's rank. Hand-built records, hand-computed
// values.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <chrono>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <vector>

#include <unistd.h>

#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>

#include "embedscope/profiler/cupti/cupti_decode.h"
#include "embedscope/profiler/cupti/session_drain.h"
#include "embedscope/profiler/cupti/step_drain.h"
#include "embedscope/sessions/store/session.h"
#include "profiler_backend/activity_records.h"
#include "profiler_backend/gpu_trace_meta.h"

using namespace embedscope;
using profiler::CuptiDecoder;
using profiler::GpuOp;
using profiler::StepDrain;

namespace {
using DrainRecords = embedscope::test_support::ActivityRecords;

void drain_kernel(DrainRecords& b, uint32_t device, uint32_t stream, uint32_t corr, uint64_t start, uint64_t end) {
  auto& k = b.add<CUpti_ActivityKernel10>();
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = "k";
  k.deviceId = device;
  k.contextId = 1 + device;
  k.streamId = stream;
  k.correlationId = corr;
  k.start = start;
  k.end = end;
}

void drain_launch(DrainRecords& b, uint32_t corr, uint64_t start) {
  auto& a = b.add<CUpti_ActivityAPI>();
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  a.correlationId = corr;
  a.start = start;
  a.end = start + 5;
  a.threadId = 7;
}

void drain_kernel_named(DrainRecords& b, const char* name, uint32_t device, uint32_t stream, uint32_t corr,
                        uint64_t start, uint64_t end) {
  auto& k = b.add<CUpti_ActivityKernel10>();
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.deviceId = device;
  k.contextId = 1 + device;
  k.streamId = stream;
  k.correlationId = corr;
  k.start = start;
  k.end = end;
}

// A MEMORY2 device allocation of `bytes` at `address`, time `ts`, on `stream` of `device`
// (CUPTI_INVALID_STREAM_ID: a device-level cudaMalloc), correlation `corr`.
CUpti_ActivityMemory4& drain_allocation(DrainRecords& b, uint64_t address, uint64_t bytes, uint64_t ts,
                                        uint32_t device, uint32_t stream, uint32_t corr = 0) {
  auto& m = b.add<CUpti_ActivityMemory4>();
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.address = address;
  m.bytes = bytes;
  m.timestamp = ts;
  m.deviceId = device;
  m.streamId = stream;
  m.correlationId = corr;
  return m;
}

// The CuptiTracer's part played by a decoder fed hand-built buffers.
class DecoderSource final : public profiler::GpuRecordSource {
 public:
  CuptiDecoder dec;
  bool refuse_drain = false;
  std::atomic<int> drains{0}, stops{0};
  std::function<void()> in_drain;  // runs inside drain() (a slow CUPTI flush)
  void feed(const DrainRecords& b) { dec.add_buffer(b.data(), b.size()); }
  std::vector<GpuOp> drain() override {
    ++drains;
    if (in_drain) in_drain();
    if (refuse_drain) throw std::runtime_error("CUPTI: cuptiActivityFlushAll failed: CUPTI_ERROR_UNKNOWN");
    return dec.take(false);
  }
  std::vector<GpuOp> stop() override {
    ++stops;
    return dec.take(true);
  }
  std::vector<sessions::MemoryEvent> take_memory_events() override { return dec.take_memory_events(); }
  int64_t join_collectives(std::vector<GpuOp>& ops, const std::vector<sessions::CollectiveRecord>& records) override {
    return dec.join_collectives(ops, records);
  }
};

std::filesystem::path drain_session_path(const char* what) {
  auto p = std::filesystem::temp_directory_path() / ("es_session_drain_" + std::string(what) + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  return p;
}

GpuOp drain_op(int32_t rank, int64_t start) {
  GpuOp g;
  g.op.rank = rank;
  g.op.start_ns = start;
  g.op.end_ns = start + 10;
  return g;
}
}  // namespace

TEST(StepDrain, OneDrainPerStepOfTheSlowestRank) {
  StepDrain d({0, 1}, -2);
  EXPECT_FALSE(d.close_step(0, -1, 100, 200));  // rank 1 has not ended the step
  EXPECT_TRUE(d.close_step(1, -1, 110, 210));
  EXPECT_FALSE(d.close_step(0, 0, 220, 300));
  EXPECT_FALSE(d.close_step(0, 1, 310, 400));    // rank 0 ahead: still one drain due
  EXPECT_TRUE(d.close_step(1, 0, 230, 320));
  EXPECT_EQ(d.drains_due(), 2);
  EXPECT_THROW(d.close_step(7, 0, 0, 1), std::invalid_argument);
}

TEST(StepDrain, OpsGoOutInTheStepOfTheirStartOnceThatStepHasEnded) {
  StepDrain d({0, 1}, -2);  // warmup 1: setup's work is step -2
  d.close_step(0, -1, 100, 200);
  d.close_step(1, -1, 110, 210);
  // rank 0: before its first window (setup), inside it, after it (step 0 still running); rank 1
  // inside its window; rank 5 has no window at all
  auto out = d.place({drain_op(0, 50), drain_op(0, 150), drain_op(0, 250), drain_op(1, 205), drain_op(5, 10)}, false);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].op.start_ns, 50);
  EXPECT_EQ(out[0].op.step, -2);
  EXPECT_EQ(out[1].op.step, -1);
  EXPECT_EQ(out[2].op.rank, 1);
  EXPECT_EQ(out[2].op.step, -1);
  EXPECT_EQ(d.held_ops(), 2u);
  // rank 0 ends step 0 [220, 300): its op at 250 is step 0's now; one at 305 (between two steps) waits
  d.close_step(0, 0, 220, 300);
  out = d.place({drain_op(0, 305)}, false);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].op.start_ns, 250);
  EXPECT_EQ(out[0].op.step, 0);
  EXPECT_EQ(d.held_ops(), 2u);
  // the end: what is held goes out with the windows there are (305 after step 0's start: step 0)
  out = d.place(std::vector<GpuOp>{}, true);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].op.rank, 5);
  EXPECT_EQ(out[0].op.step, -2);
  EXPECT_EQ(out[1].op.start_ns, 305);
  EXPECT_EQ(out[1].op.step, 0);
  EXPECT_EQ(d.held_ops(), 0u);
}

TEST(StepDrain, MemoryEventsTakeTheirStepTheSameWay) {
  StepDrain d({0}, -1);
  d.close_step(0, 0, 1000, 2000);
  std::vector<sessions::MemoryEvent> ev{{0, 500, 99, "cupti_alloc", 0x10, 4096, 4096, "cuda_device"},
                                        {0, 1500, 99, "cupti_alloc", 0x20, 512, 512, "cuda_device_pool"},
                                        {0, 2500, 99, "cupti_free", 0x20, 512, 512, "cuda_device_pool"}};
  auto out = d.place(ev, false);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].step, -1);  // setup's cudaMalloc
  EXPECT_EQ(out[1].step, 0);
  EXPECT_EQ(d.held_events(), 1u);
  out = d.place(std::vector<sessions::MemoryEvent>{}, true);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].time_ns, 2500);
  EXPECT_EQ(out[0].step, 0);
}

TEST(StepDrain, AKilledRunKeepsTheGpuOpsOfItsEndedSteps) {
  // The cuda executor's drain at each step end, by hand: records decoded, placed, written; the
  // run then dies in step 1 (no final drain, the writer never closes): step 0's kernel is in the
  // file, step 1's is not.
  const auto path = std::filesystem::temp_directory_path() / ("es_cupti_drain_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  CuptiDecoder dec;
  StepDrain drain({0}, -1);
  {
    sessions::SessionWriter w(path.string());
    DrainRecords b;
    drain_launch(b, 1, 1100);
    drain_kernel(b, 0, 3, 1, 1200, 1300);  // step 0 [1000, 2000)
    drain_launch(b, 2, 2100);
    drain_kernel(b, 0, 3, 2, 2200, 2300);  // step 1, still running at the drain
    dec.add_buffer(b.data(), b.size());
    ASSERT_TRUE(drain.close_step(0, 0, 1000, 2000));
    std::vector<sessions::OpEvent> ops;
    for (const auto& g : drain.place(dec.take(false), false)) ops.push_back(g.op);
    w.add_ops(ops);
    EXPECT_EQ(drain.held_ops(), 1u);
    std::vector<sessions::OpEvent> never;  // killed: what the final drain would have written
    for (const auto& g : drain.place(dec.take(true), true)) never.push_back(g.op);
    ASSERT_EQ(never.size(), 1u);
    EXPECT_EQ(never[0].step, 0);  // the final rule: the last window that started before it (as before issue 14)
    w.close("killed");
  }
  sessions::SessionReader r(path.string());
  const auto ops = r.all_ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].step, 0);
  EXPECT_EQ(ops[0].start_ns, 1200);
  std::filesystem::remove(path);
}

TEST(CuptiLaunchTable, JoinedLaunchesLeaveAndTheTableIsBounded) {
  CuptiDecoder d({}, 2);
  DrainRecords b;
  drain_launch(b, 1, 10);
  drain_launch(b, 2, 20);
  drain_launch(b, 3, 30);  // the table holds 2: launch 1, the oldest, is dropped
  d.add_buffer(b.data(), b.size());
  EXPECT_EQ(d.launches_waiting(), 2u);
  EXPECT_EQ(d.stats().launches_dropped, 1);
  DrainRecords k;
  drain_kernel(k, 0, 1, 3, 100, 110);  // joins launch 3 on arrival: it leaves the table
  drain_kernel(k, 0, 1, 1, 120, 130);  // its launch was dropped
  d.add_buffer(k.data(), k.size());
  EXPECT_EQ(d.launches_waiting(), 1u);
  auto ops = d.take(false);
  ASSERT_EQ(ops.size(), 1u);  // the kernel without a launch waits one take
  EXPECT_EQ(ops[0].correlation_id, 3u);
  EXPECT_EQ(ops[0].launch_start_ns, 30);
  ops = d.take(false);        // and goes out with the next, without one
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].correlation_id, 1u);
  EXPECT_EQ(ops[0].launch_start_ns, -1);
  // a kernel before its launch (CUPTI's queues): joined at the next take, the entry removed
  DrainRecords late;
  drain_kernel(late, 0, 1, 9, 200, 210);
  drain_launch(late, 9, 190);
  drain_launch(late, 2, 20);  // again: no new place in the table
  d.add_buffer(late.data(), late.size());
  ops = d.take(false);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].launch_start_ns, 190);
  EXPECT_EQ(d.launches_waiting(), 1u);  // launch 2 only (it launched nothing)
  EXPECT_EQ(d.stats().launches_dropped, 1);
  EXPECT_THROW(CuptiDecoder({}, 0), std::invalid_argument);
  // the loss is in the session beside CUPTI's own drops
  EXPECT_EQ(test_support::gpu_trace_meta(d.stats(), "cupti_launches_dropped"), "1");
}

TEST(CuptiDecode, WaitsAndPoolAllocationsBelongToTheRankOfTheirStream) {
  // ranks 0 and 1 share device 0; rank 1's stream is CUPTI stream 7
  CuptiDecoder d;
  d.map_stream(0, 7, sessions::Lane::gpu_compute, 1);
  DrainRecords b;
  drain_kernel(b, 0, 5, 1, 10, 20);  // context 1 is device 0's
  auto& s = b.add<CUpti_ActivitySynchronization2>();
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  s.contextId = 1;
  s.streamId = 7;
  s.start = 100;
  s.end = 350;
  auto& c = b.add<CUpti_ActivitySynchronization2>();
  c = s;
  c.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  c.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;  // a device-wide wait: the device's rank
  auto& m = drain_allocation(b, 0x5000, 8192, 400, 0, 7);  // cudaMallocAsync on rank 1's stream, from a pool
  m.isAsync = 1;
  m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  d.add_buffer(b.data(), b.size());
  auto ops = d.take(true);
  ASSERT_EQ(ops.size(), 3u);  // sorted by (rank, lane, start): rank 0 kernel, rank 0 wait, rank 1 wait
  EXPECT_EQ(ops[1].op.lane, profiler::kSyncLane);
  EXPECT_EQ(ops[1].op.rank, 0);
  EXPECT_STREQ(ops[1].op.name, "cudaDeviceSynchronize");
  EXPECT_EQ(ops[2].op.lane, profiler::kSyncLane);
  EXPECT_EQ(ops[2].op.rank, 1);
  EXPECT_STREQ(ops[2].op.name, "cudaStreamSynchronize");
  EXPECT_EQ(ops[2].op.end_ns - ops[2].op.start_ns, 250);
  auto ev = d.take_memory_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].rank, 1);
  EXPECT_EQ(ev[0].action, "cupti_alloc");
  EXPECT_EQ(ev[0].tag, "cuda_device_pool");
  EXPECT_EQ(ev[0].stream, 7);
  EXPECT_EQ(ev[0].size, 8192);
}

TEST(SessionDrain, AKilledCudaRunKeepsTheGpuLanesOfItsEndedSteps) {
  // Two ranks (devices 0 and 1), warm-up 1 (setup is step -2). Rank 0's all-to-all (sequence 4)
  // ran [1000, 1600) on the host; its NCCL kernel [1150, 1500) has no runtime launch (NCCL
  // launches through the driver API).
  sessions::CollectiveRecord a2a;
  a2a.rank = 0;
  a2a.name = "output_dist/all_to_all";
  a2a.sequence = 4;
  a2a.step = -1;  // a joined kernel takes its collective's step
  a2a.start_ns = 1000;
  a2a.end_ns = 1600;
  a2a.bytes_sent = 100;
  a2a.bytes_received = 200;
  const auto path = drain_session_path("killed");
  DecoderSource src;
  int64_t asked_since = -1;
  {
    sessions::SessionWriter w(path.string());
    profiler::SessionDrain drain(src, &w, {0, 1}, -2, [&](int64_t since) {
      asked_since = since;
      return std::vector<sessions::CollectiveRecord>{a2a};
    });
    DrainRecords warm;
    drain_launch(warm, 1, 1090);
    drain_kernel(warm, 0, 3, 1, 1100, 1200);
    drain_kernel_named(warm, "ncclDevKernel_SendRecv", 0, 9, 2, 1150, 1500);
    drain_allocation(warm, 0x7000, 1 << 20, 500, 1, CUPTI_INVALID_STREAM_ID);  // rank 1's arena, cudaMalloc'ed in setup
    src.feed(warm);
    drain.step_ended(0, -1, 1000, 2000);
    EXPECT_EQ(src.drains, 0);  // rank 1 is still in the step
    drain.step_ended(1, -1, 1000, 2050);
    EXPECT_EQ(src.drains, 1);
    EXPECT_EQ(drain.ops_written(), 1);  // the NCCL kernel waits one drain for a launch
    EXPECT_EQ(drain.events_written(), 1);
    DrainRecords step0;
    drain_launch(step0, 3, 2190);
    drain_kernel(step0, 0, 3, 3, 2200, 2300);
    src.feed(step0);
    drain.step_ended(0, 0, 2100, 3000);
    drain.step_ended(1, 0, 2100, 3050);
    EXPECT_EQ(drain.drains(), 2);
    EXPECT_EQ(drain.ops_written(), 3);
    EXPECT_EQ(asked_since, 1150);  // the records that can hold the NCCL kernel
    DrainRecords step1;  // the run dies in step 1: no step end, no finish()
    drain_launch(step1, 5, 3190);
    drain_kernel(step1, 0, 3, 5, 3200, 3300);
    src.feed(step1);
    EXPECT_EQ(drain.error(), "");
    w.close("killed");
  }
  sessions::SessionReader r(path.string());
  const auto ops = r.all_ops();
  ASSERT_EQ(ops.size(), 3u);
  std::map<int64_t, int> per_step;
  for (const auto& o : ops) ++per_step[o.step];
  EXPECT_EQ(per_step, (std::map<int64_t, int>{{-1, 2}, {0, 1}}));
  bool joined = false;
  for (const auto& o : ops)
    if (r.name(o.name_id) == "output_dist/all_to_all") {
      joined = true;
      EXPECT_EQ(o.lane, static_cast<int32_t>(sessions::Lane::gpu_comm));
      EXPECT_EQ(o.category, sessions::OpCategory::comm);
      EXPECT_EQ(o.bytes, 300);
      EXPECT_EQ(o.correlation, 4u);
      EXPECT_EQ(o.step, -1);
    }
  EXPECT_TRUE(joined);
  const auto ev = r.memory_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].rank, 1);
  EXPECT_EQ(ev[0].step, -2);
  EXPECT_EQ(ev[0].action, "cupti_alloc");
  std::filesystem::remove(path);
}

TEST(SessionDrain, AFailingSourceIsRecordedAndTheFinalDrainPlacesTheStepARankDiedIn) {
  const auto path = drain_session_path("failing");
  DecoderSource src;
  src.refuse_drain = true;
  {
    sessions::SessionWriter w(path.string());
    profiler::SessionDrain drain(src, &w, {0}, -1, nullptr);
    DrainRecords b;
    drain_launch(b, 1, 140);
    drain_kernel(b, 0, 3, 1, 150, 160);  // step 0
    drain_launch(b, 2, 340);
    drain_kernel(b, 0, 3, 2, 350, 360);  // after step 1's window: step 2, which never ended
    src.feed(b);
    drain.step_ended(0, 0, 100, 200);
    drain.step_ended(0, 1, 210, 300);
    EXPECT_EQ(src.drains, 1);  // after the first failure the step ends drain no more
    EXPECT_EQ(drain.error(), "CUPTI drain at a step end failed: CUPTI: cuptiActivityFlushAll failed: CUPTI_ERROR_UNKNOWN");
    EXPECT_EQ(drain.drains(), 0);
    drain.finish({{0, 2}});
    drain.finish({{0, 2}});
    EXPECT_EQ(src.stops, 1);
    EXPECT_EQ(drain.drains(), 1);
    EXPECT_EQ(drain.ops_written(), 2);
    drain.step_ended(0, 2, 310, 400);  // after finish(): nothing
    EXPECT_EQ(src.drains, 1);
    w.close("failed");
  }
  sessions::SessionReader r(path.string());
  auto ops = r.all_ops();
  ASSERT_EQ(ops.size(), 2u);
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  EXPECT_EQ(ops[0].step, 0);
  EXPECT_EQ(ops[1].step, 2);  // not step 1: the rank was in step 2 when it ended
  std::filesystem::remove(path);
}

// The cuda executor's drain (Mode::background): the rank that ends a step last does not wait for
// CUPTI's flush; the drain's thread does it, and finish() writes what is left after it.
TEST(SessionDrain, ABackgroundDrainNeverHoldsTheRankThatEndedTheStep) {
  const auto path = drain_session_path("background");
  DecoderSource src;
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool open = false;
  std::atomic<bool> on_test_thread{false};
  const auto test_thread = std::this_thread::get_id();
  src.in_drain = [&] {  // the flush takes until the test opens the gate (at most 2 s)
    if (std::this_thread::get_id() == test_thread) on_test_thread = true;
    std::unique_lock<std::mutex> lock(gate_mu);
    gate_cv.wait_for(lock, std::chrono::seconds(2), [&] { return open; });
  };
  {
    sessions::SessionWriter w(path.string());
    profiler::SessionDrain drain(src, &w, {0}, -1, nullptr, profiler::SessionDrain::Mode::background);
    DrainRecords b;
    drain_launch(b, 1, 140);
    drain_kernel(b, 0, 3, 1, 150, 160);  // step 0
    src.feed(b);
    drain.step_ended(0, 0, 100, 200);  // returns although the drain it started is blocked
    drain.step_ended(0, 1, 210, 300);  // due while one runs: done with it or after it
    EXPECT_EQ(drain.drains(), 0);
    for (int i = 0; i < 500 && src.drains.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(src.drains.load(), 1);  // the background thread is inside the flush
    EXPECT_FALSE(on_test_thread.load()) << "the step end drained on the rank's thread";
    DrainRecords c;
    drain_launch(c, 2, 240);
    drain_kernel(c, 0, 3, 2, 250, 260);  // step 1
    src.feed(c);
    {
      std::lock_guard<std::mutex> lock(gate_mu);
      open = true;
    }
    gate_cv.notify_all();
    drain.finish();
    EXPECT_EQ(src.stops.load(), 1);
    EXPECT_EQ(drain.ops_written(), 2);
    EXPECT_EQ(drain.error(), "");
    w.close("complete");
  }
  sessions::SessionReader r(path.string());
  auto ops = r.all_ops();
  ASSERT_EQ(ops.size(), 2u);
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  EXPECT_EQ(ops[0].step, 0);
  EXPECT_EQ(ops[1].step, 1);
  std::filesystem::remove(path);
}

// Kernels of compute streams get the engine's op categories by name (as HTA tells computation
// from communication by name); CUB's kernels take the category of the kernel before them on
// their stream: the TBE backward's sort is optimizer work, the bucketize's scan input work.
TEST(CuptiDecoder, ComputeKernelsGetTheCategoryOfTheirOpByName) {
  CuptiDecoder d;
  DrainRecords b;
  const char* names[] = {
      "void cub::CUB_300001_SM_800_900::detail::scan::DeviceScanKernel<int>",  // first on its stream: other
      "void embedscope::engine::cuda::(anonymous namespace)::tbe_forward_kernel<float>(...)",
      "embedscope::engine::cuda::(anonymous namespace)::tbe_linearize_kernel(...)",
      "void cub::CUB_300001_SM_800_900::detail::radix_sort::DeviceRadixSortOnesweepKernel<unsigned long>",
      "void embedscope::engine::cuda::(anonymous namespace)::bucketize_count_kernel(...)",
      "void cub::CUB_300001_SM_800_900::detail::scan::DeviceScanKernel<long>",
      "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32",
      "void embedscope::engine::cuda::(anonymous namespace)::bias_relu_kernel(...)",
      "some_library_kernel",
      // tester40 #10: the dot interaction's kernels were `other`; the encoded, low-rank and host-row kernels too
      "void embedscope::engine::cuda::(anonymous namespace)::dot_forward_kernel(long, long, float const*, float*)",
      "void embedscope::engine::cuda::(anonymous namespace)::dot_backward_kernel(long, long, float const*, float*)",
      "void embedscope::engine::cuda::(anonymous namespace)::encoded_update_kernel<(embedscope::engine::TableDataType)2>(...)",
      "embedscope::engine::cuda::(anonymous namespace)::low_rank_project_kernel(long, long, long, float const*)",
      "embedscope::engine::cuda::(anonymous namespace)::low_rank_da_kernel(long, long, long, float const*)",
      "embedscope::engine::cuda::(anonymous namespace)::copy_rows_kernel(long, long, float const*, float*)",
  };
  uint64_t t = 100;
  uint32_t corr = 1;
  for (const char* n : names) {
    drain_kernel_named(b, n, 0, 3, corr++, t, t + 10);
    t += 20;
  }
  d.add_buffer(b.data(), b.size());
  auto ops = d.take(true);
  ASSERT_EQ(ops.size(), std::size(names));
  std::sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) { return x.op.start_ns < y.op.start_ns; });
  using C = sessions::OpCategory;
  const C expected[] = {C::other, C::lookup, C::optimizer, C::optimizer, C::input, C::input,    C::dense, C::dense,
                        C::other, C::dense,  C::dense,     C::optimizer, C::lookup, C::optimizer, C::memcpy};
  for (size_t i = 0; i < ops.size(); ++i)
    EXPECT_EQ(ops[i].op.category, expected[i]) << names[i] << ": " << sessions::to_string(ops[i].op.category);
  sessions::OpCategory c;
  EXPECT_EQ(profiler::kernel_category("ncclDevKernel_AllReduce_Sum_f32_RING_LL", c), profiler::KernelCategory::known);
  EXPECT_EQ(c, C::other);  // NCCL's kernels are comm by their lane (is_nccl_kernel), not by this
}

// Runtime calls that never make an activity record (cudaEventRecord, cudaStreamWaitEvent, ...)
// do not wait in the launch table: they neither push a kernel's launch out nor count as launches
// dropped (tester38 #7: 5,263 "dropped" in a 20-step cuda run, none a kernel's).
TEST(CuptiLaunchTable, CallsWithoutAnActivityDoNotWait) {
  EXPECT_TRUE(profiler::makes_activity("cudaLaunchKernel_v7000"));
  EXPECT_TRUE(profiler::makes_activity("cudaMemcpyAsync_v3020"));
  EXPECT_TRUE(profiler::makes_activity("cudaMallocAsync_v11020"));
  EXPECT_TRUE(profiler::makes_activity("cudaGraphLaunch_v10000"));
  EXPECT_FALSE(profiler::makes_activity("cudaEventRecord_v3020"));
  EXPECT_FALSE(profiler::makes_activity("cudaStreamWaitEvent_v3020"));
  CuptiDecoder d({}, 2);
  DrainRecords b;
  drain_launch(b, 1, 10);  // a kernel's launch
  for (uint32_t i = 0; i < 20; ++i) {
    auto& a = b.add<CUpti_ActivityAPI>();
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = i % 2 ? CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020 : CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020;
    a.correlationId = 100 + i;
    a.start = 20 + i;
    a.end = 21 + i;
  }
  drain_kernel(b, 0, 1, 1, 100, 110);
  d.add_buffer(b.data(), b.size());
  EXPECT_EQ(d.stats().launches_dropped, 0);
  EXPECT_EQ(d.stats().runtime, 21);
  const auto ops = d.take(true);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].launch_start_ns, 10);  // still joined: the 20 calls did not push it out
}

// Ranks sharing a GPU: the intra-device communicator's copies and add_f32 kernels on the rank's
// gpu_comm lane take the name, sequence and step of the collective whose host window holds them
// (tester38 #6: they were listed as collectives named memcpy_dtod, memcpy_htod, ...).
TEST(CuptiDecoder, IntraDeviceCommCopiesTakeTheirCollective) {
  sessions::CollectiveRecord rec;
  rec.rank = 0;
  rec.name = "input_dist/ids";
  rec.sequence = 5;
  rec.step = 2;
  rec.start_ns = 1000;
  rec.end_ns = 2000;
  rec.bytes_sent = 64;
  auto comm_op = [](const char* name, int32_t rank, int64_t s, int64_t e, int64_t bytes) {
    GpuOp g;
    g.op = sessions::OpEvent{rank, sessions::Lane::gpu_comm, sessions::OpCategory::comm, name, 0, s, e, bytes, 0};
    return g;
  };
  std::vector<GpuOp> ops{comm_op("memcpy_dtod", 0, 1100, 1200, 64), comm_op("add_f32_kernel", 0, 1300, 1400, 0),
                         comm_op("memcpy_htod", 0, 30000, 30100, 8),  // 28 us after the record (tolerance 20 us): not its
                         comm_op("memcpy_dtod", 1, 1100, 1200, 64)};  // rank 1 has no record here
  CuptiDecoder d;
  EXPECT_EQ(d.join_collectives(ops, {rec}), 0);  // no NCCL kernel joined
  EXPECT_STREQ(ops[0].op.name, "input_dist/ids");
  EXPECT_EQ(ops[0].op.correlation, 5u);
  EXPECT_EQ(ops[0].op.step, 2);
  EXPECT_EQ(ops[0].op.bytes, 64);  // its own bytes
  EXPECT_STREQ(ops[1].op.name, "input_dist/ids");
  EXPECT_STREQ(ops[2].op.name, "memcpy_htod");
  EXPECT_EQ(ops[2].op.correlation, 0u);
  EXPECT_STREQ(ops[3].op.name, "memcpy_dtod");
}

// A rank that failed inside its first step has no window: its records from that step's start on
// are that step's, those before set-up's (tester38 #4: a cuda run that crashed in step 0, warm-up
// 0, had every GPU op filed as warm-up and its GPU table empty).
TEST(StepDrain, ARankThatDiedInItsFirstStepKeepsThatStepsRecords) {
  StepDrain d({0}, -1);
  d.set_running(0, {0, 500});  // step 0 began at 500 and never ended
  auto ops = d.place({drain_op(0, 100), drain_op(0, 600)}, true);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].op.step, -1);  // set-up's cudaMalloc and uploads
  EXPECT_EQ(ops[1].op.step, 0);   // the failing step's kernel
  StepDrain unknown({0}, -1);
  unknown.set_running(0, {0});  // start not known: set-up's, as before
  ops = unknown.place({drain_op(0, 600)}, true);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].op.step, -1);
}

// cudaMalloc's MEMORY2 record is written inside the call, so it can come before the call's own
// runtime record: the call then has nothing to join and must not wait in the table until it is
// pushed out and counted as a launch dropped.
TEST(CuptiLaunchTable, AnAllocationBeforeItsCallLeavesNothingWaiting) {
  CuptiDecoder d({}, 2);
  DrainRecords b;
  drain_allocation(b, 0x1000, 4096, 50, 0, CUPTI_INVALID_STREAM_ID, 42);
  auto& a = b.add<CUpti_ActivityAPI>();  // the cudaMalloc's own record, after it
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020;
  a.correlationId = 42;
  a.start = 40;
  a.end = 60;
  for (uint32_t c = 1; c <= 3; ++c) drain_launch(b, c, 100 + c);  // three launches in a table of 2
  d.add_buffer(b.data(), b.size());
  EXPECT_EQ(d.take_memory_events().size(), 1u);
  EXPECT_EQ(d.launches_waiting(), 2u);            // launches 2 and 3; the cudaMalloc is not kept
  EXPECT_EQ(d.stats().launches_dropped, 1);       // launch 1 only, pushed out by 2 and 3
}

// A pipeline's batch ahead (issue 14: sparse_dist / semi_sync on the cuda backend): its lookup
// (semi_sync) runs under step i's dense part, so a kernel of batch i + 1 can start inside step
// i's window and complete - its record reaching CUPTI's buffers - only after step i ended, even
// after step i + 1 ended. It still goes to step i, the step that issued it (as its host span);
// a kernel of step i + 1 in the same late drain goes to step i + 1.
TEST(StepDrain, ABatchAheadsKernelThatCompletesAfterItsStepStaysInThatStep) {
  StepDrain d({0, 1}, -1);
  d.close_step(0, 0, 100, 200);
  d.close_step(1, 0, 100, 210);
  EXPECT_TRUE(d.place(std::vector<GpuOp>{}, false).empty());  // step 0's drain: the kernel still running
  d.close_step(0, 1, 200, 300);
  d.close_step(1, 1, 210, 310);
  GpuOp ahead = drain_op(0, 190);  // batch 1's lookup on rank 0, issued at the end of step 0
  ahead.op.end_ns = 260;           // done inside step 1
  auto out = d.place({ahead, drain_op(1, 205), drain_op(0, 250)}, false);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].op.start_ns, 190);
  EXPECT_EQ(out[0].op.step, 0);
  EXPECT_EQ(out[1].op.step, 0);  // rank 1's step 0 ran until 210
  EXPECT_EQ(out[2].op.step, 1);
  EXPECT_EQ(d.held_ops(), 0u);
}
