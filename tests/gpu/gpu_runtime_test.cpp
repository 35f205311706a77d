// GPU runtime on real devices (label `gpu`): NCCL collectives on every visible GPU against a
// host computation, and CUPTI on a known program. Skipped, with cudaGetDeviceCount's answer,
// where no device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <numeric>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "embedscope/engine/comm/collective_math.h"
#include "embedscope/engine/comm/nccl_comm.h"
#include "embedscope/profiler/device/cuda_device.h"
#include "embedscope/profiler/cupti/cupti_tracer.h"
#include "probe_kernels.h"

using namespace embedscope;
using engine::NcclComm;
using engine::NcclGroup;

#define REQUIRE_GPUS(n)                                                              \
  do {                                                                               \
    if (auto why = profiler::cuda_unavailable_reason(n); !why.empty()) GTEST_SKIP() << why; \
  } while (0)
#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

namespace {
int gpus() { return profiler::cuda_devices().count; }

std::vector<int> all_devices() {
  std::vector<int> d(static_cast<size_t>(gpus()));
  std::iota(d.begin(), d.end(), 0);
  return d;
}

// A device buffer of floats on `device`, filled from / read back to the host.
struct DeviceBuffer {
  int device;
  float* p = nullptr;
  size_t n;
  DeviceBuffer(int dev, size_t count) : device(dev), n(count) {
    cudaSetDevice(device);
    cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(float));
  }
  ~DeviceBuffer() { cudaFree(p); }
  void put(const std::vector<float>& v) {
    cudaSetDevice(device);
    cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice);
  }
  std::vector<float> get() const {
    std::vector<float> v(n);
    cudaSetDevice(device);
    cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost);
    return v;
  }
};

float tag(int from, int to, int k) { return static_cast<float>(from * 10000 + to * 100 + k); }
}  // namespace

TEST(NcclCollectives, AllVisibleGpusMatchTheHost) {
  REQUIRE_GPUS(1);
  const int n = gpus();
  auto comms = NcclComm::init_all(all_devices(), "world", std::chrono::milliseconds(60000));
  std::vector<sessions::CollectiveRecord> records;
  profiler::RunClock clock;
  for (auto& c : comms) c->set_observer(&clock, [&](sessions::CollectiveRecord&& r) { records.push_back(std::move(r)); });

  // all-to-all(v): rank r sends r + j + 1 elements to rank j, tagged (r, j, k).
  auto cnt = [](int from, int to) { return static_cast<int64_t>(from + to + 1); };
  std::vector<std::unique_ptr<DeviceBuffer>> a2a_send, a2a_recv;
  std::vector<std::vector<int64_t>> sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    std::vector<float> v;
    for (int j = 0; j < n; ++j) {
      sc[r].push_back(cnt(r, j));
      rc[r].push_back(cnt(j, r));
      for (int k = 0; k < cnt(r, j); ++k) v.push_back(tag(r, j, k));
    }
    a2a_send.push_back(std::make_unique<DeviceBuffer>(r, v.size()));
    a2a_send.back()->put(v);
    a2a_recv.push_back(std::make_unique<DeviceBuffer>(r, std::accumulate(rc[r].begin(), rc[r].end(), size_t{0})));
  }
  // reduce-scatter with uneven blocks (j + 2 floats for rank j) and all-reduce of 1000 floats.
  std::vector<int64_t> blocks(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) blocks[j] = j + 2;
  const int64_t total = std::accumulate(blocks.begin(), blocks.end(), int64_t{0});
  std::vector<std::unique_ptr<DeviceBuffer>> rs_send, rs_recv, ag_send, ag_recv, ar;
  for (int r = 0; r < n; ++r) {
    std::vector<float> v(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) v[i] = static_cast<float>((r + 1) * (i + 1));
    rs_send.push_back(std::make_unique<DeviceBuffer>(r, v.size()));
    rs_send.back()->put(v);
    rs_recv.push_back(std::make_unique<DeviceBuffer>(r, blocks[r]));
    std::vector<float> mine(static_cast<size_t>(blocks[r]), static_cast<float>(r) + 0.5f);
    ag_send.push_back(std::make_unique<DeviceBuffer>(r, mine.size()));
    ag_send.back()->put(mine);
    ag_recv.push_back(std::make_unique<DeviceBuffer>(r, static_cast<size_t>(total)));
    ar.push_back(std::make_unique<DeviceBuffer>(r, 1000));
    ar.back()->put(std::vector<float>(1000, static_cast<float>(r + 1)));
  }

  std::vector<engine::NcclWork> works;
  {
    NcclGroup g;
    for (int r = 0; r < n; ++r) {
      auto& c = *comms[r];
      works.push_back(c.all_to_all_v("test/a2a", nullptr, a2a_send[r]->p, sc[r], a2a_recv[r]->p, rc[r], 4));
      works.push_back(c.reduce_scatter("test/rs", nullptr, rs_send[r]->p, blocks, rs_recv[r]->p));
      works.push_back(c.all_gather_v("test/ag", nullptr, ag_send[r]->p, ag_recv[r]->p, blocks, 4));
      works.push_back(c.all_reduce_sum("test/ar", nullptr, ar[r]->p, 1000));
    }
    g.end();
  }
  for (auto& w : works) w.synchronize();

  for (int r = 0; r < n; ++r) {
    const auto got = a2a_recv[r]->get();
    size_t at = 0;
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < cnt(j, r); ++k) ASSERT_EQ(got[at++], tag(j, r, k)) << "rank " << r << " from " << j;
    // Block r of every rank, summed: sum_q (q+1) (off_r + i + 1).
    const int64_t off = std::accumulate(blocks.begin(), blocks.begin() + r, int64_t{0});
    const auto rs = rs_recv[r]->get();
    for (int64_t i = 0; i < blocks[r]; ++i)
      EXPECT_FLOAT_EQ(rs[i], static_cast<float>(n * (n + 1) / 2 * (off + i + 1)));
    const auto ag = ag_recv[r]->get();
    size_t p = 0;
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < blocks[q]; ++i) EXPECT_FLOAT_EQ(ag[p++], static_cast<float>(q) + 0.5f);
    for (float x : ar[r]->get()) ASSERT_FLOAT_EQ(x, static_cast<float>(n * (n + 1) / 2));
  }
  // One record per rank and collective, with collective_math's bytes.
  ASSERT_EQ(records.size(), static_cast<size_t>(4 * n));
  for (const auto& rec : records) {
    EXPECT_GE(rec.end_ns, rec.start_ns);
    if (rec.op == "all_reduce") {
      EXPECT_EQ(rec.sequence, 4u);
      EXPECT_EQ(rec.bytes_sent, engine::all_reduce_bytes(1000, n, rec.rank, 4).sent);
    }
    if (rec.op == "all_to_all") {
      EXPECT_EQ(rec.sequence, 1u);
      EXPECT_EQ(rec.bytes_sent, engine::all_to_all_bytes(sc[rec.rank], rc[rec.rank], rec.rank, 4).sent);
    }
  }
  EXPECT_EQ(comms[0]->counters().collectives, 4);
}

TEST(NcclCollectives, SplitMismatchIsRefusedBeforeDataMoves) {
  REQUIRE_GPUS(1);
  const int n = gpus();
  auto comms = NcclComm::init_all(all_devices(), "world", std::chrono::milliseconds(60000));
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  NcclGroup g;
  for (int r = 0; r < n; ++r) {
    std::vector<int64_t> send(static_cast<size_t>(n), 2), recv(static_cast<size_t>(n), 2);
    if (r == n - 1) recv[0] = 3;  // the last rank expects 3 from rank 0, which sends 2
    bufs.push_back(std::make_unique<DeviceBuffer>(r, static_cast<size_t>(3 * n)));
    comms[r]->all_to_all_v("test/bad", nullptr, bufs.back()->p, send, bufs.back()->p, recv, 4);
  }
  try {
    g.end();
    FAIL() << "no SplitMismatchError";
  } catch (const engine::SplitMismatchError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 sends 2 elements to rank " + std::to_string(n - 1) + ", which expects 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(NcclCollectives, OneRankPerThreadThroughTheFileStore) {
  REQUIRE_GPUS(1);
  const int n = gpus();
  const auto dir = std::filesystem::temp_directory_path() / ("embedscope_nccl_" + std::to_string(::getpid()));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::vector<float>> got(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        const ncclUniqueId id = engine::exchange_nccl_unique_id(dir.string(), "world", r, std::chrono::milliseconds(30000));
        auto c = NcclComm::init_rank(id, n, r, r, "world", std::chrono::milliseconds(60000));
        // all-to-all of one float per pair (the split check all-gathers first), then all-reduce.
        std::vector<int64_t> ones(static_cast<size_t>(n), 1);
        DeviceBuffer send(r, static_cast<size_t>(n)), recv(r, static_cast<size_t>(n));
        std::vector<float> v(static_cast<size_t>(n));
        for (int j = 0; j < n; ++j) v[j] = tag(r, j, 0);
        send.put(v);
        c->all_to_all_v("test/a2a", nullptr, send.p, ones, recv.p, ones, 4).synchronize();
        EXPECT_EQ(c->sequence(), 2u);  // the split check, then the all-to-all
        got[r] = recv.get();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  std::filesystem::remove_all(dir);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    for (int j = 0; j < n; ++j) EXPECT_EQ(got[r][j], tag(j, r, 0));
  }
}

TEST(NcclCollectives, TimeoutAbortsAndNamesTheCollective) {
  REQUIRE_GPUS(1);
  auto comms = NcclComm::init_all({0}, "world", std::chrono::milliseconds(300));
  cudaSetDevice(0);
  cudaStream_t compute;
  CUDA_OK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  int* flag = nullptr;
  CUDA_OK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped));
  *flag = 0;
  int* dflag = nullptr;
  CUDA_OK(cudaHostGetDevicePointer(&dflag, flag, 0));
  DeviceBuffer buf(0, 16);
  // The compute stream spins, so the all-reduce (which waits for it) cannot finish in time.
  CUDA_OK(profiler::launch_probe_spin(dflag, compute));
  auto w = comms[0]->all_reduce_sum("dense/all_reduce", compute, buf.p, 16);
  // ncclCommAbort synchronizes the comm stream, which waits for the spinning kernel: release it
  // 2 s after the timeout, from another thread.
  std::thread releaser([flag] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2300));
    *reinterpret_cast<volatile int*>(flag) = 1;
  });
  try {
    w.synchronize();
    FAIL() << "no CollectiveError";
  } catch (const engine::CollectiveError& e) {
    EXPECT_TRUE(e.timed_out);
    EXPECT_EQ(e.sequence, 1u);
    EXPECT_NE(std::string(e.what()).find("all_reduce 'dense/all_reduce' (group world, sequence 1) did not finish "
                                         "within 300 ms"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(comms[0]->aborted());
  releaser.join();
  CUDA_OK(cudaStreamSynchronize(compute));
  cudaStreamDestroy(compute);
  cudaFreeHost(flag);
}

// The flight recorder on an NCCL communicator (issue 18): an all-reduce is started once
// issued and completed once synchronize() sees its end; an all-to-all outside a group records its
// split check first, with a sequence number of its own.
TEST(NcclCollectives, FlightRecorderSeesEachCollectiveIssuedAndCompleted) {
  REQUIRE_GPUS(1);
  auto comms = NcclComm::init_all({0}, "world", std::chrono::milliseconds(60000));
  engine::FlightRecorder fr(0, 8);
  comms[0]->set_flight_recorder(&fr);
  DeviceBuffer buf(0, 16), out(0, 4);
  auto w = comms[0]->all_reduce_sum("dense/all_reduce", nullptr, buf.p, 16);
  auto d = fr.dump(0, "test");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].state == "started" || d[0].state == "scheduled") << d[0].state;
  w.synchronize();
  const std::vector<int64_t> four{4};
  comms[0]->all_to_all_v("output_dist", nullptr, buf.p, four, out.p, four, sizeof(float)).synchronize();
  d = fr.dump(1, "test");
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].name, "dense/all_reduce");
  EXPECT_EQ(d[0].input_elements, 16);
  EXPECT_EQ(d[1].name, "output_dist/split_check");
  EXPECT_EQ(d[1].sequence, 2u);
  EXPECT_EQ(d[2].name, "output_dist");
  EXPECT_EQ(d[2].sequence, 3u);
  EXPECT_EQ(d[2].input_elements, 4);
  for (const auto& e : d) {
    EXPECT_EQ(e.state, "completed") << e.name;
    EXPECT_GE(e.time_completed_ns, e.time_started_ns) << e.name;
    EXPECT_EQ(e.timeout_ms, 60000);
  }
}

TEST(Cupti, SeesTheKernelsAndCopiesOfAKnownProgram) {
  REQUIRE_GPUS(1);
  constexpr int kLaunches = 50;
  constexpr int64_t kN = 1 << 20;
  profiler::RunClock clock;
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(nullptr));  // create the context before tracing: only the program is traced
  profiler::CuptiTracer tracer(clock);
  const int64_t t0 = clock.now_ns();
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  tracer.map_stream(0, s, sessions::Lane::gpu_compute);
  float* d = nullptr;
  CUDA_OK(cudaMalloc(&d, kN * sizeof(float)));
  float* h = nullptr;  // pinned: each copy is one DMA transfer, one CUPTI record
  CUDA_OK(cudaMallocHost(&h, kN * sizeof(float)));
  std::fill(h, h + kN, 1.0f);
  CUDA_OK(cudaMemcpyAsync(d, h, kN * sizeof(float), cudaMemcpyHostToDevice, s));
  for (int i = 0; i < kLaunches; ++i) CUDA_OK(profiler::launch_probe_scale(d, kN, 1.0f, s));
  CUDA_OK(cudaMemcpyAsync(h, d, kN * sizeof(float), cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  const int64_t t1 = clock.now_ns();
  EXPECT_EQ(h[0], 1.0f + kLaunches);
  CUDA_OK(cudaFree(d));
  CUDA_OK(cudaFreeHost(h));
  CUDA_OK(cudaDeviceSynchronize());
  auto ops = tracer.stop();
  const auto mem = tracer.take_memory_events();

  int kernels = 0, h2d = 0, d2h = 0;
  for (const auto& g : ops) {
    if (std::string(g.op.name).find("embedscope_probe_scale") != std::string::npos) {
      ++kernels;
      EXPECT_EQ(g.op.lane, sessions::Lane::gpu_compute);
      EXPECT_EQ(g.op.rank, 0);
      EXPECT_NE(std::string(g.launch_api).find("cudaLaunchKernel"), std::string::npos) << g.launch_api;
      EXPECT_LE(g.launch_start_ns, g.op.start_ns + 50'000);  // launched before it ran (calibration slack)
      // Calibrated onto the host clock: inside the program's host window (50 us slack).
      EXPECT_GE(g.op.start_ns, t0 - 50'000);
      EXPECT_LE(g.op.end_ns, t1 + 50'000);
    }
    const bool is_h2d = std::string(g.op.name) == "memcpy_htod", is_d2h = std::string(g.op.name) == "memcpy_dtoh";
    if (is_h2d || is_d2h) {
      EXPECT_EQ(g.op.bytes, kN * 4);
    }
    h2d += is_h2d;
    d2h += is_d2h;
  }
  EXPECT_EQ(kernels, kLaunches);
  EXPECT_EQ(h2d, 1);
  EXPECT_EQ(d2h, 1);
  EXPECT_EQ(tracer.dropped(), 0);
  int allocs = 0, frees = 0;
  for (const auto& e : mem) {
    if (e.tag != "cuda_device" || e.size != kN * 4) continue;
    allocs += e.action == profiler::kMemoryAllocAction;
    frees += e.action == profiler::kMemoryFreeAction;
  }
  EXPECT_EQ(allocs, 1);
  EXPECT_EQ(frees, 1);
  // Drift between the start and stop calibrations of a sub-second program: under 1 ms.
  EXPECT_LT(std::abs(tracer.drift_ns()), 1'000'000);
  cudaStreamDestroy(s);
}

TEST(Cupti, NcclKernelsJoinTheirCollectiveRecords) {
  REQUIRE_GPUS(2);  // a single rank's all-reduce is a copy: no NCCL kernel
  const int n = gpus();
  profiler::RunClock clock;
  auto comms = NcclComm::init_all(all_devices(), "world", std::chrono::milliseconds(60000));
  std::vector<sessions::CollectiveRecord> records;
  for (auto& c : comms) c->set_observer(&clock, [&](sessions::CollectiveRecord&& r) { records.push_back(std::move(r)); });
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  for (int r = 0; r < n; ++r) bufs.push_back(std::make_unique<DeviceBuffer>(r, 1 << 20));
  profiler::CuptiTracer tracer(clock);
  for (int r = 0; r < n; ++r) tracer.map_stream(r, comms[r]->stream(), sessions::Lane::gpu_comm);
  std::vector<engine::NcclWork> works;
  {
    NcclGroup g;
    for (int r = 0; r < n; ++r) works.push_back(comms[r]->all_reduce_sum("dense/all_reduce", nullptr, bufs[r]->p, 1 << 20));
    g.end();
  }
  for (auto& w : works) w.synchronize();
  for (int r = 0; r < n; ++r) cudaSetDevice(r), cudaDeviceSynchronize();
  auto ops = tracer.stop();
  EXPECT_EQ(tracer.join_collectives(ops, records), n);
  int joined = 0;
  for (const auto& g : ops)
    if (g.nccl && std::string(g.op.name) == "dense/all_reduce") {
      ++joined;
      EXPECT_EQ(g.op.lane, sessions::Lane::gpu_comm);
      EXPECT_EQ(g.op.category, sessions::OpCategory::comm);
      EXPECT_EQ(g.op.correlation, 1u);
      EXPECT_EQ(g.op.bytes, 2 * engine::all_reduce_bytes(1 << 20, n, g.op.rank, 4).sent);
    }
  EXPECT_EQ(joined, n);
  EXPECT_EQ(tracer.dropped(), 0);
}
