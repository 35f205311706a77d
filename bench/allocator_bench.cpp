// Allocator throughput: alloc/free pairs per second of the engine's device allocators against
// glibc malloc/free on the same size mix, both measured in each iteration of the same run:
//   pairs_per_s, malloc_pairs_per_s, ratio_vs_malloc (> 1: faster than malloc)
// Size mix: log-uniform 512 B .. 4 MiB (the engine's per-step buffers span that range), a
// window of 64 live allocations (the oldest is freed before each new one), fixed seed.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <random>
#include <vector>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"

namespace {
using namespace embedscope::engine;
using Clock = std::chrono::steady_clock;

const std::vector<int64_t>& sizes() {
  static const std::vector<int64_t> s = [] {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(std::log(512.0), std::log(4.0 * (1 << 20)));
    std::vector<int64_t> v(100000);
    for (auto& x : v) x = static_cast<int64_t>(std::exp(u(rng)));
    return v;
  }();
  return s;
}

double seconds_malloc() {
  std::deque<void*> live;
  const auto t0 = Clock::now();
  for (int64_t s : sizes()) {
    if (live.size() == 64) {
      std::free(live.front());
      live.pop_front();
    }
    void* p = std::malloc(static_cast<size_t>(s));
    benchmark::DoNotOptimize(p);
    live.push_back(p);
  }
  for (void* p : live) std::free(p);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double seconds_device(DeviceAllocator& alloc) {
  std::deque<Allocation> live;
  const auto t0 = Clock::now();
  for (int64_t s : sizes()) {
    if (live.size() == 64) {
      alloc.free(live.front());
      live.pop_front();
    }
    live.push_back(alloc.allocate(s, "bench"));
  }
  for (const auto& a : live) alloc.free(a);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void BM_alloc_free_pairs(benchmark::State& state) {
  const auto kind = static_cast<AllocatorKind>(state.range(0));
  auto alloc = DeviceAllocator::create({kind, int64_t{4} << 30, 0, true});
  double ours = 0, theirs = 0;
  for (auto _ : state) {
    const double s = seconds_device(*alloc);
    state.SetIterationTime(s);
    ours += s;
    theirs += seconds_malloc();
  }
  const double pairs = static_cast<double>(sizes().size()) * static_cast<double>(state.iterations());
  state.SetLabel(to_string(kind));
  state.counters["pairs_per_s"] = pairs / ours;
  state.counters["malloc_pairs_per_s"] = pairs / theirs;
  state.counters["ratio_vs_malloc"] = theirs / ours;
}
BENCHMARK(BM_alloc_free_pairs)->Arg(0)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

// Share of criteo_kaggle's step time (4 ranks, table_wise) spent inside the caching allocator,
// warmup and setup included: allocator time per rank / wall time per rank.
void BM_allocator_share_of_step(benchmark::State& state) {
  WorkloadSpec spec = load_preset("criteo_kaggle");
  spec.devices.count = 4;
  spec.steps = 10;
  double share = 0;
  for (auto _ : state) {
    TrainerOptions opt;
    opt.trace = false;
    opt.keep_events = false;
    const auto t0 = Clock::now();
    RunResult r = run_training(spec, plan_sharding(spec), opt);
    const double wall = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    double alloc = 0;
    for (const auto& rk : r.ranks) alloc += static_cast<double>(rk.allocator_ns);
    share += alloc / static_cast<double>(r.ranks.size()) / wall;
  }
  state.counters["allocator_share"] = share / static_cast<double>(state.iterations());
}
BENCHMARK(BM_allocator_share_of_step)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
