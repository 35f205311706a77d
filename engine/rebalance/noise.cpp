// The noise rule of balance lookup_time (rebalance/noise.h): the robust window load, the noise of
// the ranks' shares over the window, and the verdict on a predicted gain.
#include "embedscope/engine/rebalance/noise.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/engine/rebalance/reshard.h"

namespace embedscope::engine::rebalance {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  const double hi = v[h];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h));
  return (lo + hi) / 2;
}

double imbalance_noise(const std::vector<std::vector<int64_t>>& per_step_rank) {
  std::vector<std::vector<double>> share;  // share[r][k]: rank r's share of the mean in the k-th counted step
  size_t W = 0;
  for (const auto& row : per_step_rank) {
    if (W == 0) W = row.size(), share.assign(W, {});
    if (row.size() != W)
      throw std::invalid_argument(fmt::format("rebalance: a step of {} ranks in a window of {}", row.size(), W));
    double total = 0;
    for (int64_t x : row) total += static_cast<double>(x);
    if (total <= 0) continue;
    for (size_t r = 0; r < W; ++r) share[r].push_back(static_cast<double>(W) * static_cast<double>(row[r]) / total);
  }
  double sigma = 0;
  for (const auto& q : share) {
    if (q.size() < 2) continue;
    const double mid = median_of(q);
    std::vector<double> dev;
    for (double v : q) dev.push_back(std::abs(v - mid));
    sigma = std::max(sigma, kMadToSigma * median_of(dev) / std::sqrt(static_cast<double>(q.size())));
  }
  return sigma;
}

GainCheck check_gain(double imbalance_before, double imbalance_after, double noise, int64_t steps) {
  GainCheck c;
  c.gain = imbalance_before - imbalance_after;
  c.relative_gain = imbalance_before > 0 ? c.gain / imbalance_before : 0;
  c.noise = noise;
  c.enough = c.gain > kNoiseMargin * noise && c.relative_gain >= kMinTimeGain;
  if (!c.enough)
    c.why = fmt::format("the predicted gain, lookup ns max/mean {:.2f} -> {:.2f} ({:.1f}%), is within the noise of the "
                        "measured lookup ns: it needs > {:g} x {:.3f} ({:g} MAD / sqrt({}) of the ranks' shares over {} "
                        "steps) and >= {:g}% of {:.2f}",
                        imbalance_before, imbalance_after, 100 * c.relative_gain, kNoiseMargin, noise, kMadToSigma,
                        steps, steps, 100 * kMinTimeGain, imbalance_before);
  return c;
}

ObservedLoad median_window_load(const ShardingPlan& plan, const std::vector<int64_t>& gathered, int world,
                                int64_t steps) {
  const int64_t S = flat_shard_count(plan);
  if (steps < 1 || static_cast<int64_t>(gathered.size()) != world * steps * S)
    throw std::invalid_argument(fmt::format("rebalance: {} counters for {} ranks x {} steps x {} shards",
                                            gathered.size(), world, steps, S));
  // per flat shard, its value in each step (summed over the ranks' blocks)
  std::vector<std::vector<double>> per_step(static_cast<size_t>(S), std::vector<double>(static_cast<size_t>(steps), 0));
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < steps; ++i)
      for (int64_t k = 0; k < S; ++k)
        per_step[static_cast<size_t>(k)][static_cast<size_t>(i)] +=
            static_cast<double>(gathered[static_cast<size_t>((r * steps + i) * S + k)]);
  ObservedLoad out = ObservedLoad::zeros(plan);
  int64_t k = 0;
  for (size_t t = 0; t < plan.tables.size(); ++t)
    for (size_t s = 0; s < plan.tables[t].shards.size(); ++s, ++k)
      out.ids[t][s] = std::llround(static_cast<double>(steps) * median_of(per_step[static_cast<size_t>(k)]));
  return out;
}

void hold_within_noise(Proposal& p, const WorkloadSpec& spec, const ShardingPlan& current, const GainCheck& check) {
  if (check.enough) return;
  std::vector<RefusedMove> held;
  auto name = [&](int t) { return spec.tables.at(static_cast<size_t>(t)).name; };
  for (const TableMove& m : p.moves)
    held.push_back({m.table, m.from, m.to, m.bytes,
                    fmt::format("table \"{}\" ({}) from rank {} to rank {}: {}", name(m.table), format_bytes(m.bytes),
                                m.from, m.to, check.why),
                    "noise"});
  for (const TypeChange& c : p.changes) {
    const std::string where = c.to_type == ShardingType::table_wise
                                  ? fmt::format("{} back to table_wise on rank {}", to_string(c.from_type), c.to)
                                  : fmt::format("from rank {} to {}", c.from, to_string(c.to_type));
    held.push_back({c.table, c.from, c.to_type == ShardingType::table_wise ? c.to : (c.to_type == ShardingType::row_wise ? -1 : -2),
                    c.bytes, fmt::format("table \"{}\" ({}) {}: {}", name(c.table), format_bytes(c.bytes), where, check.why),
                    "noise"});
  }
  for (RefusedMove& r : p.refused) held.push_back(std::move(r));
  p.refused = std::move(held);
  p.moves.clear();
  p.changes.clear();
  p.plan = current;
  p.load_after = p.load_before;
  p.imbalance_after = p.imbalance_before;
  p.bytes_moved = 0;
}

std::optional<GainCheck> apply_noise_rule(Proposal& p, const WorkloadSpec& spec, const ShardingPlan& current,
                                          const std::vector<std::vector<int64_t>>& per_step_rank) {
  if (!p.worth_it()) return std::nullopt;
  const GainCheck check = check_gain(p.imbalance_before, p.imbalance_after, imbalance_noise(per_step_rank),
                                     static_cast<int64_t>(per_step_rank.size()));
  hold_within_noise(p, spec, current, check);
  return check;
}

}  // namespace embedscope::engine::rebalance
