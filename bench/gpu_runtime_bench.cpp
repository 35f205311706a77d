// GPU runtime benchmarks (bench_gpu_runtime; needs a CUDA device, else every benchmark is
// skipped with cudaGetDeviceCount's answer):
//  - NCCL all-reduce and all-to-all on every visible GPU (one process drives all of them):
//    algorithm and bus bandwidth as nccl-tests defines them (busbw = algbw x factor,
//    collective_math.h);
//  - CUPTI tracing overhead: the step time of a fixed kernel loop with CUPTI tracing (drained
//    every step, as an executor would at a step boundary) over the same loop untraced, measured
//    in the same run; goal <= 1.05 (`goal_ratio` = 1.05 / ratio, > 1 meets it).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <vector>

#include <cuda_runtime_api.h>

#include "embedscope/engine/comm/collective_math.h"
#include "embedscope/engine/comm/nccl_comm.h"
#include "embedscope/profiler/device/cuda_device.h"
#include "embedscope/profiler/cupti/cupti_tracer.h"
#include "embedscope/profiler/cupti/session_drain.h"
#include "probe_kernels.h"

using namespace embedscope;

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool skip_without_device(benchmark::State& state) {
  const std::string why = profiler::cuda_unavailable_reason(1);
  if (why.empty()) return false;
  state.SkipWithError(why.c_str());
  return true;
}

// Every visible GPU, one communicator each, and a device buffer of `bytes` (send) and `bytes`
// (receive) per rank.
struct NcclSetup {
  std::vector<std::unique_ptr<engine::NcclComm>> comms;
  std::vector<char*> send, recv;
  explicit NcclSetup(size_t bytes) {
    const int n = profiler::cuda_devices().count;
    std::vector<int> devs(static_cast<size_t>(n));
    std::iota(devs.begin(), devs.end(), 0);
    comms = engine::NcclComm::init_all(devs, "world", std::chrono::milliseconds(120000));
    for (int r = 0; r < n; ++r) {
      cudaSetDevice(r);
      char *s = nullptr, *d = nullptr;
      cudaMalloc(&s, bytes);
      cudaMalloc(&d, bytes);
      cudaMemset(s, 0, bytes);
      send.push_back(s);
      recv.push_back(d);
    }
  }
  ~NcclSetup() {
    for (size_t r = 0; r < send.size(); ++r) {
      cudaSetDevice(static_cast<int>(r));
      cudaDeviceSynchronize();
      cudaFree(send[r]);
      cudaFree(recv[r]);
    }
  }
  int n() const { return static_cast<int>(comms.size()); }
};

// Times `iters` rounds of `issue` (one collective on every rank, one NCCL group) after 5 warmups.
template <class Issue>
double time_rounds(NcclSetup& s, int iters, Issue&& issue) {
  auto round = [&] {
    std::vector<engine::NcclWork> w;
    {
      engine::NcclGroup g;
      for (int r = 0; r < s.n(); ++r) w.push_back(issue(*s.comms[static_cast<size_t>(r)], r));
      g.end();
    }
    for (auto& x : w) x.synchronize();
  };
  for (int i = 0; i < 5; ++i) round();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) round();
  return seconds_since(t0) / iters;
}

void report(benchmark::State& state, const char* op, double bytes, double secs, int n) {
  state.SetIterationTime(secs);
  const double algbw = bytes / secs / 1e9;
  state.counters["ranks"] = n;
  state.counters["time_us"] = secs * 1e6;
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = algbw * engine::bus_bandwidth_factor(op, n);
  // tester40 #13: a one-GPU machine's 0 GB/s bus bandwidth read as a failure
  if (n == 1)
    state.SetLabel("1 GPU: nothing crosses a link, so busbw is 0 by nccl-tests' definition; algbw is the local copy");
}

void BM_NcclAllReduce(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const auto bytes = static_cast<size_t>(state.range(0));
  NcclSetup s(bytes);
  for (auto _ : state) {
    const double t = time_rounds(s, 20, [&](engine::NcclComm& c, int r) {
      return c.all_reduce_sum("bench/all_reduce", nullptr, reinterpret_cast<float*>(s.send[static_cast<size_t>(r)]),
                              static_cast<int64_t>(bytes / 4));
    });
    report(state, "all_reduce", static_cast<double>(bytes), t, s.n());
  }
}

void BM_NcclAllToAll(benchmark::State& state) {
  if (skip_without_device(state)) return;
  const auto bytes = static_cast<size_t>(state.range(0));
  NcclSetup s(bytes);
  const int n = s.n();
  std::vector<int64_t> counts(static_cast<size_t>(n), static_cast<int64_t>(bytes / 4 / static_cast<size_t>(n)));
  for (auto _ : state) {
    const double t = time_rounds(s, 20, [&](engine::NcclComm& c, int r) {
      return c.all_to_all_v("bench/all_to_all", nullptr, s.send[static_cast<size_t>(r)], counts,
                            s.recv[static_cast<size_t>(r)], counts, 4);
    });
    report(state, "all_to_all", static_cast<double>(counts[0] * 4 * n), t, n);
  }
}

// One step: kLaunches launches of the probe kernel over kN floats, then a stream synchronize.
constexpr int kLaunches = 100;
constexpr int64_t kN = int64_t{1} << 24;  // 64 MiB: about 30 us per launch on an H200

// How a traced step hands CUPTI's records over: not at all in the step (tracing's own cost), on
// the step's thread (CuptiTracer::drain at the step end), or as the cuda executor does
// (SessionDrain::Mode::background: the step end wakes the drain's thread).
enum class StepDrainMode { none, inline_drain, background };

double median_step_s(float* x, cudaStream_t s, int steps, profiler::CuptiTracer* tracer, StepDrainMode mode,
                     const profiler::RunClock& clock) {
  std::unique_ptr<profiler::SessionDrain> drain;
  if (tracer && mode == StepDrainMode::background)
    drain = std::make_unique<profiler::SessionDrain>(*tracer, nullptr, std::vector<int32_t>{0}, -1, nullptr,
                                                     profiler::SessionDrain::Mode::background);
  std::vector<double> t;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    const int64_t start_ns = clock.now_ns();
    for (int k = 0; k < kLaunches; ++k) profiler::launch_probe_scale(x, kN, 1.0f, s);
    cudaStreamSynchronize(s);
    if (tracer && mode == StepDrainMode::inline_drain) benchmark::DoNotOptimize(tracer->drain());
    if (drain) drain->step_ended(0, i, start_ns, clock.now_ns());
    t.push_back(seconds_since(t0));
  }
  drain.reset();  // its thread ends; not finish(), which would stop the tracer
  if (tracer) benchmark::DoNotOptimize(tracer->drain());  // what is left of these steps, outside the timing
  std::nth_element(t.begin(), t.begin() + steps / 2, t.end());
  return t[static_cast<size_t>(steps / 2)];
}

// Tracing overhead (goal: traced step <= 1.05 x untraced, with the cuda executor's background
// drain), beside the same steps with the drain on the step's thread and with no drain at all.
void BM_CuptiOverhead(benchmark::State& state) {
  if (skip_without_device(state)) return;
  cudaSetDevice(0);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float* x = nullptr;
  cudaMalloc(&x, kN * sizeof(float));
  cudaMemset(x, 0, kN * sizeof(float));
  profiler::RunClock clock;
  for (auto _ : state) {
    median_step_s(x, s, 3, nullptr, StepDrainMode::none, clock);  // warm up
    const double off = median_step_s(x, s, 21, nullptr, StepDrainMode::none, clock);
    double background = 0, inline_drain = 0, no_drain = 0;
    int64_t dropped = 0, records = 0;
    {
      profiler::CuptiTracer tracer(clock);
      median_step_s(x, s, 3, &tracer, StepDrainMode::background, clock);
      background = median_step_s(x, s, 21, &tracer, StepDrainMode::background, clock);
      inline_drain = median_step_s(x, s, 21, &tracer, StepDrainMode::inline_drain, clock);
      no_drain = median_step_s(x, s, 21, &tracer, StepDrainMode::none, clock);
      tracer.stop();
      dropped = tracer.dropped();
      records = tracer.stats().records;  // 66 steps of 100 kernels, their launches and waits: > 13,000
    }
    state.SetIterationTime(background);
    state.counters["untraced_step_us"] = off * 1e6;
    state.counters["traced_step_us"] = background * 1e6;
    state.counters["traced_inline_drain_step_us"] = inline_drain * 1e6;
    state.counters["traced_no_drain_step_us"] = no_drain * 1e6;
    state.counters["ratio"] = background / off;
    state.counters["goal_ratio"] = 1.05 / (background / off);
    state.counters["dropped_records"] = static_cast<double>(dropped);
    state.counters["records"] = static_cast<double>(records);
  }
  cudaFree(x);
  cudaStreamDestroy(s);
}
}  // namespace

BENCHMARK(BM_NcclAllReduce)->Arg(8 << 20)->Arg(256 << 20)->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NcclAllToAll)->Arg(8 << 20)->Arg(256 << 20)->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CuptiOverhead)->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
