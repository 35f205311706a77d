// Google Benchmark of the Kineto importer on a large trace (issue 12: "streaming: peak RSS under
// 1 GiB whatever the trace size, and import at >= 150 MB/s of uncompressed JSON on one core").
// A Kineto-shaped trace is generated once per run into $TMPDIR (8 ranks x 250 MB = 2 GB by
// default; EMBEDSCOPE_BENCH_IMPORT_MB sets the total) and removed at exit. The layout is
// torch.profiler's (one event per block of lines, args on their own lines) and the mix is a
// DLRM training step's: per op a cpu_op, its python_function caller, a cudaLaunchKernel, the
// kernel and the ac2g flow pair; per step a ProfilerStep, record_param_comms spans with their
// NCCL kernels (all-to-all of the embeddings, all-reduce of the dense gradients), each launched
// by a cudaLaunchKernel with its correlation id and ac2g flow (generator version 2,
// kineto_trace.h), so the imported session has communication kernels for HTA's figures.
//
// Each measurement runs in a child process (fork, then wait4 for the child's peak RSS and CPU
// time, so that the generator and earlier benchmarks do not count):
//   import          embedscope's import of every rank file into one session:
//                   MB_per_s (uncompressed JSON / wall), MB_per_s_cpu (/ the child's CPU time),
//                   goal_ratio = MB_per_s_cpu / 150 (>= 1 meets the goal), peak_rss_MiB,
//                   rss_goal_ratio = 1024 MiB / peak RSS (>= 1 meets it)
//   python_json     python3's json.load of ONE rank file (all eight would need ~20 GB of RAM):
//                   MB_per_s, peak_rss_MiB; import_over_python = import's MB_per_s over this
//   hta             Holistic Trace Analysis's TraceAnalysis over the rank files, when the
//                   `hta` Python package is importable; skipped with the reason otherwise

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/store/session.h"
#include "kineto_trace.h"

namespace {
using namespace embedscope;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 8;

fs::path work_dir() {
  static const fs::path d = fs::temp_directory_path() / ("es_bench_import_" + std::to_string(getpid()));
  return d;
}

int64_t total_mb() {
  const char* e = std::getenv("EMBEDSCOPE_BENCH_IMPORT_MB");
  return e ? std::max<int64_t>(8, std::atoll(e)) : 2000;
}

// The rank files, generated once (before any clock starts).
const std::vector<std::string>& trace_files() {
  static const std::vector<std::string> files = [] {
    fs::create_directories(work_dir());
    std::atexit([] { fs::remove_all(work_dir()); });
    std::vector<std::string> out;
    const int64_t per_rank = total_mb() * 1'000'000 / kRanks;
    for (int r = 0; r < kRanks; ++r) {
      const fs::path p = work_dir() / fmt::format("rank{}.pt.trace.json", r);
      bench::write_kineto_rank(p, r, kRanks, per_rank);
      out.push_back(p.string());
    }
    return out;
  }();
  return files;
}

double total_bytes(const std::vector<std::string>& files) {
  double b = 0;
  for (const auto& f : files) b += static_cast<double>(fs::file_size(f));
  return b;
}

struct ChildRun {
  int status = -1;
  double wall_s = 0, cpu_s = 0, peak_rss_mib = 0;
};

// Runs `body` in a forked child (exit status its return value) and measures it.
template <class F>
ChildRun in_child(F body) {
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) _exit(body());
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  ChildRun r;
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
            static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  r.peak_rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  return r;
}

int run_python(const std::string& code, const std::vector<std::string>& args) {
  std::vector<const char*> argv{"/usr/bin/python3", "-c", code.c_str()};
  for (const auto& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  const int null = open("/dev/null", O_WRONLY);
  if (null >= 0) {  // the child's output is not the benchmark's (its exit status says how it went)
    dup2(null, 1);
    dup2(null, 2);
  }
  execv(argv[0], const_cast<char* const*>(argv.data()));
  return 127;
}

double g_import_mb_per_s = 0;

void BM_import(benchmark::State& state) {
  const auto& files = trace_files();
  const double mb = total_bytes(files) / 1e6;
  const std::string db = (work_dir() / "imported.db").string();
  ChildRun r;
  for (auto _ : state) {
    fs::remove(db);
    r = in_child([&] {
      try {
        sessions::SessionWriter w(db, true);
        sessions::importers::import_kineto_json(files, w, {});
        w.close("complete");
        return 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "import failed: %s\n", e.what());
        return 1;
      }
    });
    if (r.status != 0) state.SkipWithError("the import failed (see stderr)");
    state.SetIterationTime(r.wall_s);
  }
  g_import_mb_per_s = mb / r.wall_s;
  state.counters["trace_MB"] = mb;
  state.counters["MB_per_s"] = mb / r.wall_s;
  state.counters["MB_per_s_cpu"] = mb / r.cpu_s;
  state.counters["goal_ratio"] = mb / r.cpu_s / 150.0;
  state.counters["peak_rss_MiB"] = r.peak_rss_mib;
  state.counters["rss_goal_ratio"] = 1024.0 / r.peak_rss_mib;
  fs::remove(db);
}
BENCHMARK(BM_import)->Unit(benchmark::kSecond)->UseManualTime()->Iterations(1);

void BM_python_json(benchmark::State& state) {
  const std::string& file = trace_files().front();
  const double mb = static_cast<double>(fs::file_size(file)) / 1e6;
  ChildRun r;
  for (auto _ : state) {
    r = in_child([&] { return run_python("import json, sys\njson.load(open(sys.argv[1]))", {file}); });
    if (r.status != 0) state.SkipWithError("python3 json.load failed");
    state.SetIterationTime(r.wall_s);
  }
  state.counters["trace_MB"] = mb;
  state.counters["MB_per_s"] = mb / r.wall_s;
  state.counters["peak_rss_MiB"] = r.peak_rss_mib;
  if (g_import_mb_per_s > 0) state.counters["import_over_python"] = g_import_mb_per_s / (mb / r.wall_s);
}
BENCHMARK(BM_python_json)->Unit(benchmark::kSecond)->UseManualTime()->Iterations(1);

void BM_hta(benchmark::State& state) {
  if (in_child([] { return run_python("import hta", {}); }).status != 0) {
    state.SkipWithError("HTA is not installed (the hta Python package, HolisticTraceAnalysis on PyPI): not measured");
    return;
  }
  const auto& files = trace_files();
  const double mb = total_bytes(files) / 1e6;
  ChildRun r;
  for (auto _ : state) {
    r = in_child([&] {
      return run_python("import sys\nfrom hta.trace_analysis import TraceAnalysis\nTraceAnalysis(trace_dir=sys.argv[1])",
                        {work_dir().string()});
    });
    if (r.status != 0) state.SkipWithError("HTA's TraceAnalysis failed on the generated trace");
    state.SetIterationTime(r.wall_s);
  }
  state.counters["MB_per_s"] = mb / r.wall_s;
  state.counters["peak_rss_MiB"] = r.peak_rss_mib;
  if (g_import_mb_per_s > 0) state.counters["import_over_hta"] = g_import_mb_per_s / (mb / r.wall_s);
}
BENCHMARK(BM_hta)->Unit(benchmark::kSecond)->UseManualTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
