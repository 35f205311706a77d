// Google Benchmark of the session file and the tracer (issue: session files and the CPU
// profiler). Each benchmark reports its figure and the ratio to its goal, measured in this run:
//   writer            events per second into a session (goal >= 1M/s): goal_ratio = rate / 1M
//   reader_window     the ops of one lane in a 1% time window of a 10M-event session
//                     (goal < 50 ms): goal_ratio = 50 ms / time
//   reader_open       open a 10M-event session and read its metadata (goal < 200 ms)
//   tracing_overhead  mean step time of criteo_kaggle on 4 ranks with the profiler and session
//                     on, over the same with tracing off, alternated in one process
//                     (goal <= 1.03): on_over_off
// The 10M-event session is written once to $TMPDIR (about 400 MB) and removed at exit.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "embedscope/engine/workload/spec.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"

namespace {
using namespace embedscope;
namespace fs = std::filesystem;

fs::path tmp(const std::string& name) { return fs::temp_directory_path() / ("es_bench_" + std::to_string(getpid()) + "_" + name); }

// 10M ops over 4 ranks x 2 lanes, 1 us apart per lane, like a long trace.
std::vector<sessions::OpEvent> synthetic_ops(int64_t n, int64_t first) {
  static const char* names[] = {"lookup", "input_dist/ids", "dense_forward_backward", "backward_fused_optimizer"};
  std::vector<sessions::OpEvent> ops;
  ops.reserve(static_cast<size_t>(n));
  for (int64_t i = first; i < first + n; ++i) {
    const int lane_id = static_cast<int>(i % 8);
    const int64_t t = (i / 8) * 1000;
    ops.push_back({lane_id / 2, static_cast<sessions::Lane>(lane_id % 2),
                   lane_id % 2 ? sessions::OpCategory::comm : sessions::OpCategory::lookup, names[i % 4], t / 1000000, t,
                   t + 700, lane_id % 2 ? 4096 : 0, 0});
  }
  return ops;
}

void write_session(const std::string& path, int64_t n) {
  sessions::SessionWriter w(path);
  w.set_metadata("world_size", "4");
  for (int r = 0; r < 4; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
  }
  const int64_t batch = 100000;
  for (int64_t i = 0; i < n; i += batch) w.add_ops(synthetic_ops(std::min(batch, n - i), i));
  w.close("complete");
}

void BM_writer(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto ops = synthetic_ops(n, 0);
  const std::string path = tmp("writer.db");
  double close_ms = 0;
  for (auto _ : state) {
    sessions::SessionWriter w(path, /*overwrite=*/true);
    for (int r = 0; r < 4; ++r) w.add_lane({r, 0, "compute", "thread"});
    for (size_t i = 0; i < ops.size(); i += 50000)
      w.add_ops(std::vector<sessions::OpEvent>(ops.begin() + static_cast<long>(i),
                                               ops.begin() + static_cast<long>(std::min(ops.size(), i + 50000))));
    const auto t0 = std::chrono::steady_clock::now();
    w.close("complete");  // the final commits and the checkpoint into one file
    close_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  state.counters["close_ms"] = close_ms / static_cast<double>(state.iterations());
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["goal_ratio"] = benchmark::Counter(static_cast<double>(n) / 1e6, benchmark::Counter::kIsIterationInvariantRate);  // shown as "/s": events per s / 1M
  state.SetItemsProcessed(state.iterations() * n);
  fs::remove(path);
}
BENCHMARK(BM_writer)->Arg(2'000'000)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

const std::string& big_session() {
  static const std::string path = [] {
    const std::string p = tmp("10M.db").string();
    write_session(p, 10'000'000);
    std::atexit([] { fs::remove(tmp("10M.db")); });
    return p;
  }();
  return path;
}

void BM_reader_window(benchmark::State& state) {
  const std::string& path = big_session();
  sessions::SessionReader r(path);
  // lane (2, comm) spans [0, 1.25e9) ns: a 1% window in the middle
  const int64_t span = 10'000'000 / 8 * 1000, t0 = span / 2, t1 = t0 + span / 100;
  size_t n = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto ops = r.ops(2, 1, t0, t1);
    n = ops.size();
    benchmark::DoNotOptimize(ops.data());
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
                    static_cast<double>(state.iterations());
  state.counters["ops_returned"] = static_cast<double>(n);
  state.counters["goal_ratio"] = 50.0 / ms;  // > 1: under the 50 ms goal
}
BENCHMARK(BM_reader_window)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_reader_open(benchmark::State& state) {
  const std::string& path = big_session();
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    sessions::SessionReader r(path);
    benchmark::DoNotOptimize(r.meta("world_size"));
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
                    static_cast<double>(state.iterations());
  state.counters["goal_ratio"] = 200.0 / ms;  // > 1: under the 200 ms goal
}
BENCHMARK(BM_reader_open)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_tracing_overhead(benchmark::State& state) {
  engine::WorkloadSpec spec = engine::load_preset("criteo_kaggle");
  spec.devices.count = 4;
  spec.steps = 10;
  spec.warmup_steps = 2;
  auto mean_step = [&](bool on) {
    engine::TrainerOptions opt;
    opt.trace = on;
    opt.keep_events = false;
    if (on) opt.session_path = tmp("overhead.db").string();
    auto r = engine::run_training(spec, engine::plan_sharding(spec), opt);
    if (on) fs::remove(opt.session_path);
    return std::accumulate(r.step_time_ns.begin(), r.step_time_ns.end(), 0.0) / static_cast<double>(r.step_time_ns.size());
  };
  double on = 0, off = 0;
  for (auto _ : state) {
    off += mean_step(false);
    on += mean_step(true);
  }
  state.counters["step_ms_off"] = off / static_cast<double>(state.iterations()) / 1e6;
  state.counters["step_ms_on"] = on / static_cast<double>(state.iterations()) / 1e6;
  state.counters["on_over_off"] = on / off;
}
BENCHMARK(BM_tracing_overhead)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
