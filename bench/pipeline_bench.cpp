// Google Benchmark of the training pipelines on a slow network (issue 7): criteo_kaggle on 4 CPU
// ranks with every link limited to 1 GB/s (network emulation), for the pipelines base,
// sparse_dist and semi_sync, each with fp32 and bf16 comms (qcomms, both directions). Every
// configuration writes a session; sessions::analyze gives its mean step time and its exposed
// communication (RunStats::exposed_comm_ns: per rank, communication with no compute under it,
// averaged over ranks). Both are reported per step and as ratios to base fp32, measured in the
// same iterations (base fp32, then the configuration, alternated, so that a change of the
// machine's load hits both alike; the ratios are of the sums over the iterations):
//   step_vs_base     mean step time / base fp32's
//   exposed_vs_base  exposed communication / base fp32's
//   overlap_pct      HTA overlap: time computing while communicating / time communicating
// Environment: EMBEDSCOPE_BENCH_STEPS (measured steps, default 6; 2 warmup steps first).

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"

namespace {
using namespace embedscope;
namespace fs = std::filesystem;

struct Measured {
  double step_ns = 0;     // mean step time
  double exposed_ns = 0;  // exposed communication per step (mean over ranks)
  double overlap_pct = 0;
};

Measured measure(engine::PipelineKind pipeline, engine::CommPrecision precision) {
  engine::WorkloadSpec spec = engine::load_preset("criteo_kaggle");
  spec.devices.count = 4;
  const char* steps = std::getenv("EMBEDSCOPE_BENCH_STEPS");
  spec.steps = steps ? std::max(1, std::atoi(steps)) : 6;
  spec.warmup_steps = 2;
  spec.pipeline = pipeline;
  spec.qcomms = {precision, precision};
  spec.network.intra_node.bandwidth_bytes_per_s = 1'000'000'000;  // 1 GB/s, every link
  spec.network.inter_node.bandwidth_bytes_per_s = 1'000'000'000;
  engine::TrainerOptions opt;
  opt.keep_events = false;
  opt.session_path = (fs::temp_directory_path() / ("es_bench_pipeline_" + std::to_string(getpid()) + ".db")).string();
  opt.session_overwrite = true;
  const engine::RunResult r = engine::run_training(spec, engine::plan_sharding(spec), opt);
  if (r.ended != engine::RunEnd::complete) throw std::runtime_error("criteo_kaggle run failed: " + r.error);
  const sessions::RunStats st = sessions::analyze(sessions::SessionReader(opt.session_path));
  fs::remove(opt.session_path);
  return {st.step_time_ns.mean, static_cast<double>(st.exposed_comm_ns) / static_cast<double>(st.steps), st.overlap_pct};
}

void BM_pipeline(benchmark::State& state) {
  const auto pipeline = static_cast<engine::PipelineKind>(state.range(0));
  const auto precision = static_cast<engine::CommPrecision>(state.range(1));
  const bool is_base = pipeline == engine::PipelineKind::base && precision == engine::CommPrecision::fp32;
  state.SetLabel(std::string(engine::to_string(pipeline)) + " " + engine::to_string(precision));
  Measured base, m;
  for (auto _ : state) {
    const Measured b = measure(engine::PipelineKind::base, engine::CommPrecision::fp32);
    const Measured x = is_base ? b : measure(pipeline, precision);
    base.step_ns += b.step_ns;
    base.exposed_ns += b.exposed_ns;
    m.step_ns += x.step_ns;
    m.exposed_ns += x.exposed_ns;
    m.overlap_pct += x.overlap_pct;
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["step_ms"] = m.step_ns / n / 1e6;
  state.counters["exposed_ms"] = m.exposed_ns / n / 1e6;
  state.counters["overlap_pct"] = m.overlap_pct / n;
  state.counters["step_vs_base"] = m.step_ns / base.step_ns;
  state.counters["exposed_vs_base"] = m.exposed_ns / base.exposed_ns;
}
BENCHMARK(BM_pipeline)
    ->ArgsProduct({{static_cast<int64_t>(engine::PipelineKind::base), static_cast<int64_t>(engine::PipelineKind::sparse_dist),
                    static_cast<int64_t>(engine::PipelineKind::semi_sync)},
                   {static_cast<int64_t>(engine::CommPrecision::fp32), static_cast<int64_t>(engine::CommPrecision::bf16)}})
    ->ArgNames({"pipeline", "precision"})
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
