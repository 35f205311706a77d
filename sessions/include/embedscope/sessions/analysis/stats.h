#pragma once
// Summary statistics: the step-time distribution that `embedscope run` prints and analyze()
// gives as RunStats::step_time_ns (`embedscope stats`, the exporters, the workbench).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace embedscope::sessions {

/// Mean and nearest-rank percentiles of a sample (ns). Empty input gives all zeros.
struct Distribution {
  int64_t count = 0;
  double mean = 0;
  int64_t min = 0;
  int64_t p50 = 0;
  int64_t p99 = 0;
  int64_t max = 0;
  double stddev = 0;  ///< the sample standard deviation (n - 1 in the denominator); 0 for fewer than 2 values
};

/// Nearest-rank percentile (the smallest value with at least p% of the sample at or below it),
/// p in (0, 100]. `sorted` must be ascending and non-empty.
int64_t percentile_nearest_rank(const std::vector<int64_t>& sorted, double p);

/// Count, mean, min, nearest-rank p50 and p99, max and sample standard deviation of `values`
/// (any order); all 0 for none. Example (tested): {100, 120, 80, 110, 90} -> mean 100, min 80,
/// p50 100, max 120, stddev sqrt(1000 / 4) = 15.811.
Distribution summarize(std::vector<int64_t> values);

/// The median used everywhere a step time or a per-op time is summarized (run, stats, scaling,
/// calibrate): the nearest-rank p50, i.e. the lower middle of an even count (6 values: the 3rd
/// smallest), the value `summarize` gives as p50 (tester46 F13: calibrate took the upper middle).
/// 0 for an empty sample; `values` need not be sorted.
int64_t median_nearest_rank(std::vector<int64_t> values);

/// Steps at the end of a pipelined run that drain its pipeline (tester46 F21): they have no next
/// batch to start, so they are shorter than a steady step (TorchRec's TrainPipelineSparseDist
/// starts the next batch's input dist under a step: its last step drains 1; the semi-synchronous
/// pipeline looks up the batch after next: its last 2). `pipeline`: WorkloadSpec's JSON name
/// ("base", "sparse_dist", "semi_sync"); 0 for base and anything else.
int64_t pipeline_drain_steps(std::string_view pipeline);

/// The measured steps that the step statistics count: `step_times` in step order without the
/// last `drain` (the pipeline's drain steps, which stay recorded in the session but are left out
/// of mean, percentiles and throughput, as warm-up is). When every measured step is a drain step
/// (steps <= drain) nothing steadier exists: all are counted and `all_drain` says so.
struct SteadySteps {
  std::vector<int64_t> counted;  ///< step order
  int64_t drain_left_out = 0;    ///< drain steps not counted
  bool all_drain = false;        ///< every measured step drains the pipeline (all counted)
};
SteadySteps steady_state_steps(std::vector<int64_t> step_times, int64_t drain);

/// One indented line for `run` and `stats` under the step-time line: which measured steps drain
/// the pipeline and were left out ("  (steps 4-5 drain the semi_sync pipeline: recorded, not in
/// the step times, throughput, overlap, exposed communication, critical path or collective times;
/// 4 of 6 measured steps counted)"; RunStats::drain_steps), or, when every step drains it, a warning to
/// run more steps. "" without drain steps. `steps`: measured steps in the session.
std::string drain_steps_text(std::string_view pipeline, int64_t steps, int64_t drain_left_out, bool all_drain);

}  // namespace embedscope::sessions
