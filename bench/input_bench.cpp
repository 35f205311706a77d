// Input throughput: samples per second that the Criteo reader (engine/input/criteo) parses into
// rank batches and bucketizes (each feature row-wise over the 4 ranks of criteo_kaggle, the
// most ids any sharding sends), against a plain line scan of the same file (zlib gzread +
// memchr, no parsing) measured in the same run:
//   samples_per_s        global samples read, parsed, batched and bucketized per second
//   per_rank_samples_per_s  the same divided by the 4 ranks it feeds (each takes 1/4 of a batch)
//   scan_MB_per_s        the line scan's bytes per second; MB_per_s the reader's
//   ratio_vs_line_scan   MB_per_s / scan_MB_per_s (1 = parsing costs nothing)
// The file is generated once per run (fixed seed, 8-hex-digit categoricals and 5% empty
// fields as in Criteo's day files): EMBEDSCOPE_INPUT_BENCH_MB megabytes (default 16; docs/benchmarks.md
// reports 1024 measured by hand), plain text and gzip (level 1).

#include <benchmark/benchmark.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "embedscope/engine/input/bucketize.h"
#include "embedscope/engine/input/criteo.h"
#include "embedscope/engine/workload/presets.h"

namespace {
using namespace embedscope::engine;
using Clock = std::chrono::steady_clock;

struct Fixture {
  std::string plain, gz;
  int64_t lines = 0, bytes = 0;
  ~Fixture() {
    std::filesystem::remove(plain);
    std::filesystem::remove(gz);
  }
};

const Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    const char* env = std::getenv("EMBEDSCOPE_INPUT_BENCH_MB");
    const int64_t target = (env ? std::atoll(env) : 16) << 20;
    const auto dir = std::filesystem::temp_directory_path();
    x.plain = (dir / ("es_input_bench_" + std::to_string(getpid()) + ".tsv")).string();
    x.gz = x.plain + ".gz";
    std::ofstream out(x.plain, std::ios::binary);
    gzFile g = gzopen(x.gz.c_str(), "wb1");
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<int> pct(0, 99);
    std::geometric_distribution<int64_t> dense(0.01);
    std::string line;
    char buf[32];
    while (x.bytes < target) {
      line.clear();
      line += pct(rng) < 26 ? '1' : '0';
      for (int k = 0; k < 13; ++k) {
        line += '\t';
        if (pct(rng) >= 5) line += std::to_string(dense(rng));
      }
      for (int k = 0; k < 26; ++k) {
        line += '\t';
        if (pct(rng) >= 5) {
          std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(rng() & 0xffffffffULL));
          line += buf;
        }
      }
      line += '\n';
      out << line;
      gzwrite(g, line.data(), static_cast<unsigned>(line.size()));
      x.bytes += static_cast<int64_t>(line.size());
      ++x.lines;
    }
    gzclose(g);
    return x;
  }();
  return f;
}

double seconds_scan(const std::string& path) {
  const auto t0 = Clock::now();
  gzFile g = gzopen(path.c_str(), "rb");
  std::vector<char> buf(1 << 20);
  int64_t lines = 0;
  for (int n; (n = gzread(g, buf.data(), static_cast<unsigned>(buf.size()))) > 0;)
    for (const char* p = buf.data(); (p = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(buf.data() + n - p)))); ++p)
      ++lines;
  gzclose(g);
  benchmark::DoNotOptimize(lines);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void BM_CriteoInput(benchmark::State& state) {
  const Fixture& f = fixture();
  const bool gzip = state.range(0) == 1;
  const std::string path = gzip ? f.gz : f.plain;
  WorkloadSpec spec = load_preset("criteo_kaggle");  // 4 ranks x 512 samples
  const int W = spec.devices.count;
  const int64_t G = spec.batch_size * W;
  spec.steps = f.lines / G;
  spec.input.kind = InputKind::criteo_tsv;
  spec.input.paths = {path};
  std::vector<BucketSlot> slots;  // every feature row-wise over the W ranks
  for (int feat = 0; feat < 26; ++feat) {
    const int64_t n = spec.tables[static_cast<size_t>(feat)].num_embeddings;
    for (int r = 0; r < W; ++r) {
      const int64_t begin = n * r / W, end = n * (r + 1) / W;
      slots.push_back({feat, true, begin, end - begin});
    }
  }
  double reader_s = 0, scan_s = 0;
  int64_t samples = 0;
  for (auto _ : state) {
    scan_s += seconds_scan(path);
    const auto t0 = Clock::now();
    CriteoBatchSource src(spec);
    for (int64_t it = 0; it < spec.steps; ++it)
      for (int r = 0; r < W; ++r) {
        const Batch b = src.make(it, r);
        const auto off = b.kjt.offsets();
        benchmark::DoNotOptimize(bucketize_kjt(b.kjt.values, off, b.kjt.batch_size, slots));
      }
    reader_s += std::chrono::duration<double>(Clock::now() - t0).count();
    samples += spec.steps * G;
  }
  const double iters = static_cast<double>(state.iterations());
  const double mb = static_cast<double>(f.bytes) * static_cast<double>(spec.steps * G) / static_cast<double>(f.lines) / 1e6;
  state.counters["samples_per_s"] = static_cast<double>(samples) / reader_s;
  state.counters["per_rank_samples_per_s"] = static_cast<double>(samples) / reader_s / W;
  state.counters["MB_per_s"] = mb * iters / reader_s;
  state.counters["scan_MB_per_s"] = static_cast<double>(f.bytes) / 1e6 * iters / scan_s;
  state.counters["ratio_vs_line_scan"] = (mb * iters / reader_s) / (static_cast<double>(f.bytes) / 1e6 * iters / scan_s);
  state.counters["file_MB"] = static_cast<double>(f.bytes) / 1e6;
  state.SetLabel(gzip ? "gzip" : "plain");
}
BENCHMARK(BM_CriteoInput)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
