#pragma once
// Summary statistics: the step-time distribution that `embedscope run` prints and analyze()
// gives as RunStats::step_time_ns (`embedscope stats`, the exporters, the workbench).

#include <cstdint>
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
};

/// Nearest-rank percentile (the smallest value with at least p% of the sample at or below it),
/// p in (0, 100]. `sorted` must be ascending and non-empty.
int64_t percentile_nearest_rank(const std::vector<int64_t>& sorted, double p);

Distribution summarize(std::vector<int64_t> values);

}  // namespace embedscope::sessions
