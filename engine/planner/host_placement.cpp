// A hot host-memory table placed beside other tables by the greedy planner (planner/host_placement.h).
#include "embedscope/engine/planner/host_placement.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "embedscope/engine/model/host_cache.h"
#include "embedscope/engine/planner/stats.h"

namespace embedscope::engine {

std::vector<std::string> host_table_placement_warnings(const WorkloadSpec& spec, const ShardingPlan& plan) {
  std::vector<std::string> out;
  if (plan.world_size < 2 || plan.tables.size() != spec.tables.size()) return out;
  const std::vector<double> per_rank = expected_lookups_per_rank(spec, plan);
  const double total = std::accumulate(per_rank.begin(), per_rank.end(), 0.0);
  if (total <= 0) return out;
  const double mean = total / static_cast<double>(plan.world_size);
  for (const TablePlan& tp : plan.tables) {
    const TableSpec& t = spec.tables[static_cast<size_t>(tp.table)];
    if (t.placement == TablePlacement::device || tp.type != ShardingType::table_wise || tp.shards.size() != 1) continue;
    if (const auto it = spec.sharding.per_table.find(t.name); it != spec.sharding.per_table.end() && !it->second.ranks.empty())
      continue;  // placed where the workload says
    const int rank = tp.shards[0].rank;
    std::vector<std::string> beside;
    for (const TablePlan& other : plan.tables)
      if (other.table != tp.table &&
          std::any_of(other.shards.begin(), other.shards.end(), [&](const Shard& s) { return s.rank == rank; }))
        beside.push_back(fmt::format("\"{}\"", spec.tables[static_cast<size_t>(other.table)].name));
    if (beside.empty()) continue;
    ShardingPlan alone = plan;  // the table's own expected lookups
    alone.tables = {tp};
    const std::vector<double> own = expected_lookups_per_rank(spec, alone);
    const double ids = std::accumulate(own.begin(), own.end(), 0.0);
    if (ids <= mean) continue;
    const double rank_ids = per_rank[static_cast<size_t>(rank)];
    const double max_ids = *std::max_element(per_rank.begin(), per_rank.end());
    std::string names;
    for (size_t i = 0; i < beside.size() && i < 3; ++i) names += (i ? ", " : "") + beside[i];
    if (beside.size() > 3) names += fmt::format(" and {} more", beside.size() - 3);
    out.push_back(fmt::format(
        "table \"{}\" (placement {}) is placed by its device bytes ({}) and shares rank {} with {}: it has {:.1f}% of "
        "the expected lookups, more than a rank's mean share {:.1f}%, and rank {} {:.1f}% (ids max/mean {:.2f} "
        "predicted); the planner does not count a table's lookups. Shard it row_wise (a sharding override) to "
        "spread its lookups, or give the other tables ranks away from rank {}",
        t.name, to_string(t.placement),
        t.placement == TablePlacement::host
            ? std::string("none: its rows stay in host memory")
            : fmt::format("its {} cache", format_bytes(cache_device_bytes(t.cache_load_factor, t.rows(), t.embedding_dim))),
        rank, names, 100 * ids / total, 100 / static_cast<double>(plan.world_size), rank, 100 * rank_ids / total,
        max_ids / mean, rank));
  }
  return out;
}

}  // namespace embedscope::engine
