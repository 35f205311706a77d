// Google Benchmark of one rank per process (issue 18), each against its peer of threads measured
// in the same run:
//   processes_vs_threads/4  criteo_kaggle on 4 ranks (2 warmup + EMBEDSCOPE_BENCH_STEPS measured
//                           steps, default 4): 4 processes (fork, TrainerOptions::process, a gloo
//                           FileStore) against 4 threads of one process (the threaded executor);
//                           counters process_step_ms / thread_step_ms (median over the measured
//                           steps of the slowest rank's step time) and processes_over_threads.
//   rendezvous/N            N = 8, 64 ranks meeting in a gloo FileStore and connecting their world
//                           group (ProcessGroup: Gloo's connectFullMesh, N (N - 1) / 2 TCP pairs)
//                           as N processes, against N threads of one process over Gloo's
//                           in-process HashStore; counters process_ms / thread_ms (from the
//                           first start to the last rank connected, CLOCK_MONOTONIC, which every
//                           process shares) and processes_over_threads.
// The processes are forked before this process runs a thread of its own in an iteration (the
// threads' peer runs after they have exited). Run: build/bench/bench_launch

#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "exec/launch/store.h"

namespace {
using namespace embedscope;
namespace fs = std::filesystem;

int64_t mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

fs::path fresh_dir(const std::string& name) {
  static int n = 0;
  const auto d = fs::temp_directory_path() / ("es_bench_launch_" + std::to_string(getpid()) + "_" + name + "_" + std::to_string(n++));
  fs::remove_all(d);
  fs::create_directories(d / "store");
  return d;
}

// Waits for every child; throws naming the first that did not exit 0.
void wait_all(const std::vector<pid_t>& kids) {
  std::string bad;
  for (size_t r = 0; r < kids.size(); ++r) {
    int status = 0;
    waitpid(kids[r], &status, 0);
    if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && bad.empty()) bad = "rank " + std::to_string(r) + " failed";
  }
  if (!bad.empty()) throw std::runtime_error(bad);
}

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

engine::WorkloadSpec criteo4() {
  engine::WorkloadSpec spec = engine::load_preset("criteo_kaggle");
  spec.devices.count = 4;
  const char* steps = std::getenv("EMBEDSCOPE_BENCH_STEPS");
  spec.steps = steps ? std::max(1, std::atoi(steps)) : 4;
  spec.warmup_steps = 2;
  return spec;
}

// Median over the measured steps of the slowest rank's step time, each rank's times read from
// the files its process wrote (one int64 per step).
int64_t slowest_median(const fs::path& dir, int ranks, int64_t steps) {
  std::vector<int64_t> slowest(static_cast<size_t>(steps), 0);
  for (int r = 0; r < ranks; ++r) {
    std::ifstream f(dir / ("rank" + std::to_string(r) + ".steps"), std::ios::binary);
    for (auto& s : slowest) {
      int64_t t = 0;
      f.read(reinterpret_cast<char*>(&t), sizeof t);
      s = std::max(s, t);
    }
  }
  return median(slowest);
}

void BM_ProcessesVsThreads(benchmark::State& state) {
  const engine::WorkloadSpec spec = criteo4();
  const engine::ShardingPlan plan = engine::plan_sharding(spec);
  double proc_ns = 0, thread_ns = 0;
  for (auto _ : state) {
    const fs::path dir = fresh_dir("pvt");
    std::vector<pid_t> kids;
    for (int r = 0; r < 4; ++r) {
      const pid_t pid = fork();
      if (pid == 0) {
        int code = 3;
        try {
          engine::TrainerOptions opt;
          opt.trace = false;
          opt.keep_events = false;
          opt.process = {r, "file://" + (dir / "store").string(), "bench", "127.0.0.1", -1, -1};
          const engine::RunResult res = engine::run_training(spec, plan, opt);
          std::ofstream f(dir / ("rank" + std::to_string(r) + ".steps"), std::ios::binary);
          f.write(reinterpret_cast<const char*>(res.step_time_ns.data()),
                  static_cast<std::streamsize>(res.step_time_ns.size() * sizeof(int64_t)));
          code = res.ended == engine::RunEnd::complete ? 0 : 1;
        } catch (...) {
        }
        _exit(code);
      }
      kids.push_back(pid);
    }
    wait_all(kids);
    proc_ns += static_cast<double>(slowest_median(dir, 4, spec.steps));
    engine::TrainerOptions opt;
    opt.trace = false;
    opt.keep_events = false;
    const engine::RunResult threads = engine::run_training(spec, plan, opt);
    if (threads.ended != engine::RunEnd::complete) throw std::runtime_error(threads.error);
    thread_ns += static_cast<double>(median(threads.step_time_ns));
    fs::remove_all(dir);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["process_step_ms"] = proc_ns / n / 1e6;
  state.counters["thread_step_ms"] = thread_ns / n / 1e6;
  state.counters["processes_over_threads"] = proc_ns / thread_ns;
}
BENCHMARK(BM_ProcessesVsThreads)->Arg(4)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_Rendezvous(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<int> members(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) members[static_cast<size_t>(i)] = i;
  const auto timeout = std::chrono::milliseconds(120'000);
  double proc_ns = 0, thread_ns = 0;
  for (auto _ : state) {
    const fs::path dir = fresh_dir("rv");
    const int64_t t0 = mono_ns();
    std::vector<pid_t> kids;
    for (int r = 0; r < n; ++r) {
      const pid_t pid = fork();
      if (pid == 0) {
        int code = 3;
        try {
          engine::launch::RunStore store("file://" + (dir / "store").string(), "bench");
          auto rv = engine::Rendezvous::over_store(store.store(), [&](const std::string& k) { return store.has(k); },
                                                   "127.0.0.1");
          engine::ProcessGroup pg(rv, "world", members, r, timeout);
          const int64_t done = mono_ns();
          std::ofstream(dir / ("rank" + std::to_string(r) + ".done"), std::ios::binary)
              .write(reinterpret_cast<const char*>(&done), sizeof done);
          float x = 1;
          pg.all_reduce_sum("barrier", &x, 1);  // every pair stays up until every rank is connected
          code = 0;
        } catch (...) {
        }
        _exit(code);
      }
      kids.push_back(pid);
    }
    wait_all(kids);
    int64_t last = t0;
    for (int r = 0; r < n; ++r) {
      int64_t t = 0;
      std::ifstream(dir / ("rank" + std::to_string(r) + ".done"), std::ios::binary).read(reinterpret_cast<char*>(&t), sizeof t);
      last = std::max(last, t);
    }
    proc_ns += static_cast<double>(last - t0);
    // the peer: n threads of this process over the in-process store
    auto rv = engine::Rendezvous::in_process();
    std::vector<int64_t> done(static_cast<size_t>(n), 0);
    const int64_t t1 = mono_ns();
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        engine::ProcessGroup pg(rv, "world", members, r, timeout);
        done[static_cast<size_t>(r)] = mono_ns();
        float x = 1;
        pg.all_reduce_sum("barrier", &x, 1);
      });
    for (auto& t : threads) t.join();
    thread_ns += static_cast<double>(*std::max_element(done.begin(), done.end()) - t1);
    fs::remove_all(dir);
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["process_ms"] = proc_ns / iters / 1e6;
  state.counters["thread_ms"] = thread_ns / iters / 1e6;
  state.counters["processes_over_threads"] = proc_ns / thread_ns;
}
BENCHMARK(BM_Rendezvous)->Arg(8)->Arg(64)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
