#include "embedscope/sessions/analysis/stats.h"

#include "embedscope/sessions/analysis/counted_steps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

namespace embedscope::sessions {

int64_t percentile_nearest_rank(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) throw std::invalid_argument("percentile of an empty sample");
  if (!(p > 0.0 && p <= 100.0)) throw std::invalid_argument("percentile must be in (0, 100]");
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * n));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

Distribution summarize(std::vector<int64_t> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<int64_t>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.min = values.front();
  d.max = values.back();
  d.p50 = percentile_nearest_rank(values, 50);
  d.p99 = percentile_nearest_rank(values, 99);
  if (values.size() >= 2) {
    double sq = 0;
    for (const int64_t v : values) sq += (static_cast<double>(v) - d.mean) * (static_cast<double>(v) - d.mean);
    d.stddev = std::sqrt(sq / static_cast<double>(values.size() - 1));
  }
  return d;
}

int64_t median_nearest_rank(std::vector<int64_t> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return percentile_nearest_rank(values, 50);
}

int64_t pipeline_drain_steps(std::string_view pipeline) {
  if (pipeline == "sparse_dist") return 1;
  if (pipeline == "semi_sync") return 2;
  return 0;
}

SteadySteps steady_state_steps(std::vector<int64_t> step_times, int64_t drain) {
  SteadySteps s;
  const auto n = static_cast<int64_t>(step_times.size());
  s.drain_left_out = drain_steps_left_out(n, drain);
  s.all_drain = drain > 0 && n > 0 && n <= drain;
  step_times.resize(static_cast<size_t>(n - s.drain_left_out));
  s.counted = std::move(step_times);
  return s;
}

HeldSteps held_steps(const std::vector<StepMetric>& step_rows) {
  std::map<int32_t, std::map<int64_t, bool>> by_rank;  // rank -> its measured steps
  for (const auto& s : step_rows)
    if (s.step >= 0) by_rank[s.rank][s.step] = true;
  HeldSteps out;
  if (by_rank.size() < 2) return out;
  bool differ = false;
  const auto& first = by_rank.begin()->second;
  for (const auto& [r, steps] : by_rank)
    differ = differ || steps.size() != first.size() || steps.rbegin()->first != first.rbegin()->first;
  if (!differ) return out;
  out.common_last_step = std::numeric_limits<int64_t>::max();
  for (const auto& [r, steps] : by_rank) {
    out.ranks.push_back({r, static_cast<int64_t>(steps.size()), steps.rbegin()->first});
    out.common_last_step = std::min(out.common_last_step, steps.rbegin()->first);
  }
  return out;
}

std::string drain_steps_text(std::string_view pipeline, int64_t steps, int64_t drain_left_out, bool all_drain) {
  if (all_drain)
    return fmt::format("  warning: every measured step drains the {} pipeline (its last {} steps start no next batch): "
                       "these are not steady-state figures; run more than {} steps\n",
                       pipeline, pipeline_drain_steps(pipeline), pipeline_drain_steps(pipeline));
  if (drain_left_out <= 0) return "";
  const std::string which = drain_left_out == 1 ? fmt::format("step {} drains", steps - 1)
                                                : fmt::format("steps {}-{} drain", steps - drain_left_out, steps - 1);
  return fmt::format("  ({} the {} pipeline: recorded, not in the step times, throughput, overlap, exposed "
                     "communication, critical path or collective times; {} of {} measured steps counted)\n",
                     which, pipeline, steps - drain_left_out, steps);
}

}  // namespace embedscope::sessions
