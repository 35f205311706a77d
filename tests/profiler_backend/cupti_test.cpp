// CUPTI activity-buffer decoding from synthetic buffers laid out as CUPTI lays them out (records
// of this CUPTI's structs back to back); no device needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>

#include "embedscope/profiler/cupti/cupti_decode.h"
#include "embedscope/sessions/store/session.h"
#include "profiler_backend/activity_records.h"

#include <filesystem>
#include <unistd.h>

using namespace embedscope;
using profiler::ClockCalibration;
using profiler::CuptiDecoder;
using sessions::Lane;
using sessions::OpCategory;

namespace {
using Buffer = embedscope::test_support::ActivityRecords;

CUpti_ActivityKernel10& kernel(Buffer& b, const char* name, uint32_t device, uint32_t stream, uint32_t corr,
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
  return k;
}

CUpti_ActivityAPI& runtime(Buffer& b, uint32_t cbid, uint32_t corr, uint64_t start, uint64_t end) {
  auto& a = b.add<CUpti_ActivityAPI>();
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = cbid;
  a.correlationId = corr;
  a.start = start;
  a.end = end;
  a.threadId = 4242;
  return a;
}
}  // namespace

TEST(CuptiClock, CalibrationIsTheMidpointOffset) {
  // Host read 1000 before and 1200 after cuptiGetTimestamp returned 5'000'000: offset -4'998'900.
  const auto c = ClockCalibration::from_sample(1000, 5'000'000, 1200);
  EXPECT_EQ(c.offset_ns, 1100 - 5'000'000);
  EXPECT_EQ(c.to_host(5'000'500), 1600);
  const auto end = ClockCalibration::from_sample(9'000'000, 13'998'000, 9'000'100);  // offset -4'997'950
  EXPECT_EQ(profiler::clock_drift_ns(c, end), 950);
  EXPECT_THROW(ClockCalibration::from_sample(10, 0, 5), std::invalid_argument);
}

TEST(CuptiDecode, KernelJoinsItsLaunchByCorrelationId) {
  Buffer b;
  // The kernel's record can come before the runtime call's (separate queues in CUPTI).
  kernel(b, "_ZN10embedscope6engine23embedding_lookup_kernelEPKfPfl", 0, 7, 11, 2'000'000, 2'003'000).gridX = 128;
  runtime(b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 11, 1'990'000, 1'995'000);
  CuptiDecoder d(ClockCalibration{-1'000'000});
  d.add_buffer(b.data(), b.size());
  EXPECT_EQ(d.stats().records, 2);
  EXPECT_EQ(d.stats().kernels, 1);
  EXPECT_EQ(d.stats().runtime, 1);
  auto ops = d.take(false);
  ASSERT_EQ(ops.size(), 1u);
  const auto& g = ops[0];
  EXPECT_STREQ(g.op.name, "embedscope::engine::embedding_lookup_kernel(float const*, float*, long)");
  EXPECT_EQ(g.op.lane, Lane::gpu_compute);
  EXPECT_EQ(g.op.category, OpCategory::other);
  EXPECT_EQ(g.op.rank, 0);
  EXPECT_EQ(g.op.start_ns, 1'000'000);  // calibrated: 2'000'000 - 1'000'000
  EXPECT_EQ(g.op.end_ns, 1'003'000);
  EXPECT_EQ(g.stream_id, 7u);
  EXPECT_EQ(g.correlation_id, 11u);
  EXPECT_STREQ(g.launch_api, "cudaLaunchKernel_v7000");
  EXPECT_EQ(g.launch_start_ns, 990'000);
  EXPECT_EQ(g.launch_end_ns, 995'000);
  EXPECT_EQ(g.launch_thread, 4242u);
  EXPECT_FALSE(g.nccl);
}

TEST(CuptiDecode, KernelWaitsForItsLaunchUnlessFinal) {
  Buffer b1, b2;
  kernel(b1, "k", 1, 3, 5, 100, 200);
  CuptiDecoder d;
  d.map_device(1, 6);  // device 1 is rank 6
  d.add_buffer(b1.data(), b1.size());
  EXPECT_TRUE(d.take(false).empty());  // launch not seen yet
  runtime(b2, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 5, 50, 60);
  d.add_buffer(b2.data(), b2.size());
  auto ops = d.take(false);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].op.rank, 6);
  EXPECT_EQ(ops[0].launch_start_ns, 50);

  Buffer b3;
  kernel(b3, "orphan", 0, 3, 99, 300, 400);
  d.add_buffer(b3.data(), b3.size());
  EXPECT_TRUE(d.take(false).empty());
  ops = d.take(true);  // final: delivered without a launch
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_STREQ(ops[0].launch_api, "");
  EXPECT_EQ(ops[0].launch_start_ns, -1);
}

TEST(CuptiDecode, MemcpyAndMemsetGoToTheCopyLaneWithTheirBytes) {
  Buffer b;
  auto& m = b.add<CUpti_ActivityMemcpy6>();
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = 1 << 20;
  m.start = 1000;
  m.end = 1500;
  m.deviceId = 2;
  m.correlationId = 3;
  auto& d2h = b.add<CUpti_ActivityMemcpy6>();
  d2h = m;
  d2h.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  d2h.start = 2000;
  d2h.end = 2600;
  d2h.correlationId = 4;
  auto& s = b.add<CUpti_ActivityMemset4>();
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 4096;
  s.start = 3000;
  s.end = 3010;
  s.deviceId = 2;
  s.correlationId = 5;
  runtime(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 3, 900, 1600);
  runtime(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 4, 1900, 2700);
  runtime(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, 5, 2900, 2950);
  CuptiDecoder d;
  d.add_buffer(b.data(), b.size());
  EXPECT_EQ(d.stats().memcpys, 2);
  EXPECT_EQ(d.stats().memsets, 1);
  auto ops = d.take(false);
  ASSERT_EQ(ops.size(), 3u);
  for (const auto& g : ops) {
    EXPECT_EQ(g.op.rank, 2);
    EXPECT_EQ(g.op.lane, Lane::gpu_copy);
    EXPECT_EQ(g.op.category, OpCategory::memcpy);
  }
  EXPECT_STREQ(ops[0].op.name, "memcpy_htod");
  EXPECT_EQ(ops[0].op.bytes, 1 << 20);
  EXPECT_EQ(ops[0].op.end_ns - ops[0].op.start_ns, 500);
  EXPECT_STREQ(ops[0].launch_api, "cudaMemcpy_v3020");
  EXPECT_STREQ(ops[1].op.name, "memcpy_dtoh");
  EXPECT_STREQ(ops[2].op.name, "memset");
  EXPECT_EQ(ops[2].op.bytes, 4096);
  EXPECT_STREQ(ops[2].launch_api, "cudaMemsetAsync_v3020");
}

TEST(CuptiDecode, NcclKernelsAreCommunicationAndJoinTheirCollective) {
  Buffer b;
  // CUPTI reports mangled names (these two are symbols of NCCL 2.28's libnccl.so).
  kernel(b, "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE", 1, 9, 20, 10'000, 30'000);
  kernel(b, "ncclKernel_AllReduce_RING_LL_Sum_float", 1, 9, 21, 50'000, 70'000);
  kernel(b, "my_kernel", 1, 9, 22, 80'000, 90'000);  // comm stream mapped below
  kernel(b, "_Z31ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE", 1, 9, 23, 200'000,
         210'000);  // no record covers it
  for (uint32_t c = 20; c <= 23; ++c) runtime(b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, c, 1, 2);
  CuptiDecoder d;
  d.map_stream(1, 9, Lane::gpu_comm);
  d.add_buffer(b.data(), b.size());
  EXPECT_EQ(d.stats().nccl_kernels, 3);
  auto ops = d.take(false);
  ASSERT_EQ(ops.size(), 4u);
  for (const auto& g : ops) EXPECT_EQ(g.op.lane, Lane::gpu_comm);
  EXPECT_TRUE(ops[0].nccl);
  EXPECT_FALSE(ops[2].nccl);
  EXPECT_EQ(ops[2].op.category, OpCategory::comm);  // on the comm stream

  std::vector<sessions::CollectiveRecord> recs(3);
  recs[0].rank = 1, recs[0].name = "input_dist/ids", recs[0].sequence = 4, recs[0].start_ns = 5'000,
  recs[0].end_ns = 40'000, recs[0].bytes_sent = 300, recs[0].bytes_received = 200, recs[0].step = 2;
  // A size-1 collective that launched nothing, ended before the next kernel.
  recs[1].rank = 1, recs[1].name = "noop", recs[1].sequence = 5, recs[1].start_ns = 41'000, recs[1].end_ns = 42'000;
  recs[2].rank = 1, recs[2].name = "dense/all_reduce", recs[2].sequence = 6, recs[2].start_ns = 45'000,
  recs[2].end_ns = 75'000, recs[2].bytes_sent = 1000, recs[2].bytes_received = 1000, recs[2].step = 2;
  EXPECT_EQ(d.join_collectives(ops, recs, 0), 2);
  EXPECT_STREQ(ops[0].op.name, "input_dist/ids");
  EXPECT_EQ(ops[0].op.bytes, 500);
  EXPECT_EQ(ops[0].op.correlation, 4u);
  EXPECT_EQ(ops[0].op.step, 2);
  EXPECT_STREQ(ops[1].op.name, "dense/all_reduce");
  EXPECT_EQ(ops[1].op.correlation, 6u);
  EXPECT_EQ(ops[1].op.bytes, 2000);
  EXPECT_STREQ(ops[3].op.name,  // not joined: keeps its demangled kernel name
               "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
  EXPECT_EQ(d.stats().nccl_joined, 2);
}

TEST(CuptiDecode, SynchronizationGoesToTheSyncLaneOfItsContextsRank) {
  Buffer b;
  auto& s = b.add<CUpti_ActivitySynchronization2>();
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  s.contextId = 4;  // device 3's context, learned from the kernel below
  s.start = 500;
  s.end = 900;
  CuptiDecoder d;
  d.add_buffer(b.data(), b.size());
  EXPECT_TRUE(d.take(false).empty());  // context unknown yet
  Buffer b2;
  kernel(b2, "k", 3, 1, 8, 100, 200);  // contextId = 1 + device = 4
  runtime(b2, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 8, 10, 20);
  d.add_buffer(b2.data(), b2.size());
  auto ops = d.take(false);
  ASSERT_EQ(ops.size(), 2u);
  const auto& sync = ops[0].op.lane == profiler::kSyncLane ? ops[0] : ops[1];
  EXPECT_EQ(sync.op.lane, profiler::kSyncLane);  // never the host compute lane: a wait is not compute
  EXPECT_EQ(sync.op.category, OpCategory::other);
  EXPECT_EQ(sync.op.rank, 3);
  EXPECT_STREQ(sync.op.name, "cudaStreamSynchronize");
  EXPECT_EQ(sync.op.end_ns - sync.op.start_ns, 400);
}

TEST(CuptiDecode, Memory2BecomesAllocatorEvents) {
  Buffer b;
  auto& a = b.add<CUpti_ActivityMemory4>();
  a.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  a.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  a.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  a.address = 0x7f0000000000;
  a.bytes = 2 << 20;
  a.timestamp = 1000;
  a.deviceId = 1;
  a.streamId = CUPTI_INVALID_STREAM_ID;  // cudaMalloc: not asynchronous
  auto& f = b.add<CUpti_ActivityMemory4>();
  f = a;
  f.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  f.timestamp = 3000;
  CuptiDecoder d(ClockCalibration{10});
  d.add_buffer(b.data(), b.size());
  auto ev = d.take_memory_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].action, "cupti_alloc");  // beside the allocator's own alloc / free, never mixed
  EXPECT_EQ(ev[0].rank, 1);
  EXPECT_EQ(ev[0].time_ns, 1010);
  EXPECT_EQ(ev[0].address, 0x7f0000000000);
  EXPECT_EQ(ev[0].size, 2 << 20);
  EXPECT_EQ(ev[0].tag, "cuda_device");
  EXPECT_EQ(ev[1].action, "cupti_free");
  EXPECT_EQ(ev[1].stream, 0);  // not asynchronous: no stream
  EXPECT_EQ(ev[1].time_ns, 3010);
}

TEST(CuptiDecode, UnknownKindsAreCountedNotThrown) {
  Buffer b;
  auto& marker = b.add<CUpti_ActivityMarker2>();  // a kind CUPTI can walk but we do not decode
  marker.kind = CUPTI_ACTIVITY_KIND_MARKER;
  kernel(b, "after_marker", 0, 1, 1, 10, 20);
  auto& bad = b.add<CUpti_ActivityAPI>();  // 40 bytes of a kind no CUPTI knows
  bad.kind = static_cast<CUpti_ActivityKind>(0x7ffffff0);
  kernel(b, "unreachable", 0, 1, 2, 30, 40);
  CuptiDecoder d;
  EXPECT_NO_THROW(d.add_buffer(b.data(), b.size()));
  EXPECT_EQ(d.stats().records, 2);   // marker + kernel
  EXPECT_EQ(d.stats().kernels, 1);
  EXPECT_EQ(d.stats().unknown_kind, 2);  // the marker, and the record CUPTI could not walk
  EXPECT_EQ(d.stats().undecodable_bytes,
            static_cast<int64_t>(sizeof(CUpti_ActivityAPI) + sizeof(CUpti_ActivityKernel10)));
  auto ops = d.take(true);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_STREQ(ops[0].op.name, "after_marker");
}

TEST(CuptiDecode, RecordsWithoutTimestampsAreCountedAndDropped) {
  Buffer b;
  kernel(b, "untimed", 0, 1, 1, 0, 0);
  CuptiDecoder d;
  d.add_buffer(b.data(), b.size());
  EXPECT_EQ(d.stats().no_timestamp, 1);
  EXPECT_TRUE(d.take(true).empty());
}

TEST(CuptiDecode, NcclNamesAndCopyNames) {
  EXPECT_TRUE(profiler::is_nccl_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
  EXPECT_TRUE(profiler::is_nccl_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"));
  EXPECT_TRUE(profiler::is_nccl_kernel("_Z21ncclDevKernel_Generic24ncclDevKernelArgsStorageILm4096EE"));
  EXPECT_FALSE(profiler::is_nccl_kernel("_Z22embedscope_probe_scalePflf"));
  EXPECT_FALSE(profiler::is_nccl_kernel("nccl_like_kernel"));
  EXPECT_FALSE(profiler::is_nccl_kernel(nullptr));
  EXPECT_STREQ(profiler::memcpy_name(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD), "memcpy_dtod");
  EXPECT_STREQ(profiler::memcpy_name(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP), "memcpy_ptop");
  EXPECT_STREQ(profiler::memcpy_name(CUPTI_ACTIVITY_MEMCPY_KIND_ATOA), "memcpy");
}

TEST(CuptiDecode, GpuOpsAndCountersGoIntoTheSession) {
  Buffer b;
  kernel(b, "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE", 0, 9, 1, 1000, 3000);
  kernel(b, "lookup", 0, 7, 2, 4000, 5000);
  auto& m = b.add<CUpti_ActivityMemcpy6>();
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = 64;
  m.start = 500;
  m.end = 900;
  m.correlationId = 3;
  b.add<CUpti_ActivityMarker2>().kind = CUPTI_ACTIVITY_KIND_MARKER;
  CuptiDecoder d(ClockCalibration{100});
  d.add_buffer(b.data(), b.size());
  auto ops = d.take(true);
  ASSERT_EQ(ops.size(), 3u);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("cupti_test_" + std::to_string(::getpid()) + ".db")).string();
  {
    sessions::SessionWriter w(path, true);
    for (Lane l : {Lane::gpu_compute, Lane::gpu_comm, Lane::gpu_copy})
      w.add_lane({0, static_cast<int32_t>(l), sessions::to_string(l), "stream"});
    std::vector<sessions::OpEvent> events;
    for (const auto& g : ops) events.push_back(g.op);
    w.add_ops(events);
    profiler::write_gpu_trace_metadata(w, 7, d.stats(), ClockCalibration{100}, ClockCalibration{130});
    w.close("complete");
  }
  sessions::SessionReader r(path);
  EXPECT_EQ(r.metadata().at("cupti_dropped_records"), "7");
  EXPECT_EQ(r.metadata().at("cupti_records"), "4");
  EXPECT_EQ(r.metadata().at("cupti_unknown_records"), "1");
  EXPECT_EQ(r.metadata().at("gpu_clock_offset_ns"), "100");
  EXPECT_EQ(r.metadata().at("gpu_clock_drift_ns"), "30");
  const auto comm = r.ops(0, static_cast<int32_t>(Lane::gpu_comm), 0, 10'000);
  ASSERT_EQ(comm.size(), 1u);
  EXPECT_EQ(r.name(comm[0].name_id), "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)");
  EXPECT_EQ(comm[0].category, OpCategory::comm);
  EXPECT_EQ(comm[0].start_ns, 1100);
  const auto copies = r.ops(0, static_cast<int32_t>(Lane::gpu_copy), 0, 10'000);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].bytes, 64);
  EXPECT_EQ(r.ops(0, static_cast<int32_t>(Lane::gpu_compute), 0, 10'000).size(), 1u);
  std::vector<std::string> lane_names;
  for (const auto& l : r.lanes()) lane_names.push_back(l.name);
  EXPECT_EQ(lane_names, (std::vector<std::string>{"gpu_compute", "gpu_comm", "gpu_copy"}));
  std::filesystem::remove(path);
}

// Several ranks on one GPU (issue 14): each rank's streams name its ops (the device alone does
// not), and the copies of a comm stream (the intra-device communicator) are communication on
// gpu_comm, not gpu_copy.
TEST(CuptiDecode, StreamsOfRanksSharingAGpuNameTheirRankAndCommCopiesAreComm) {
  Buffer b;
  kernel(b, "tbe_forward", 0, 11, 1, 100, 200);  // rank 1's compute stream
  kernel(b, "add_f32_kernel", 0, 22, 2, 300, 400);  // rank 2's comm stream
  auto& m = b.add<CUpti_ActivityMemcpy6>();
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  m.bytes = 4096;
  m.start = 500;
  m.end = 600;
  m.deviceId = 0;
  m.streamId = 22;
  m.correlationId = 3;
  auto& h = b.add<CUpti_ActivityMemcpy6>();
  h = m;
  h.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  h.streamId = 11;
  h.correlationId = 4;
  h.start = 700;
  h.end = 800;
  runtime(b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1, 50, 60);
  runtime(b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 2, 250, 260);
  runtime(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 3, 450, 460);
  runtime(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 4, 650, 660);
  CuptiDecoder d;
  d.map_device(0, 3);  // the device's last rank: what an unmapped stream falls back to
  d.map_stream(0, 11, Lane::gpu_compute, 1);
  d.map_stream(0, 22, Lane::gpu_comm, 2);
  d.add_buffer(b.data(), b.size());
  auto ops = d.take(true);
  ASSERT_EQ(ops.size(), 4u);
  std::sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) { return x.op.start_ns < y.op.start_ns; });
  EXPECT_EQ(ops[0].op.rank, 1);
  EXPECT_EQ(ops[0].op.lane, Lane::gpu_compute);
  EXPECT_EQ(ops[1].op.rank, 2);
  EXPECT_EQ(ops[1].op.lane, Lane::gpu_comm);
  EXPECT_EQ(ops[1].op.category, OpCategory::comm);
  EXPECT_EQ(ops[2].op.rank, 2);
  EXPECT_EQ(ops[2].op.lane, Lane::gpu_comm);
  EXPECT_EQ(ops[2].op.category, OpCategory::comm);
  EXPECT_STREQ(ops[2].op.name, "memcpy_dtod");
  EXPECT_EQ(ops[3].op.rank, 1);
  EXPECT_EQ(ops[3].op.lane, Lane::gpu_copy);
  EXPECT_EQ(ops[3].op.category, OpCategory::memcpy);
}
