// The embedding work that moves with a shard (rebalance/shard_work.h).
#include "embedscope/engine/rebalance/shard_work.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/engine/rebalance/type_change.h"

namespace embedscope::engine::rebalance {

namespace {

void check_shape(const ShardingPlan& plan, const std::vector<std::vector<int64_t>>& v, const char* what) {
  if (v.size() != plan.tables.size())
    throw std::invalid_argument(fmt::format("shard work: {} has {} tables, the plan {}", what, v.size(), plan.tables.size()));
  for (size_t t = 0; t < v.size(); ++t)
    if (v[t].size() != plan.tables[t].shards.size())
      throw std::invalid_argument(fmt::format("shard work: {} has {} shards of table {}, the plan {}", what, v[t].size(), t,
                                              plan.tables[t].shards.size()));
}

}  // namespace

std::vector<std::vector<int64_t>> shard_work_ns(const ShardingPlan& plan, const std::vector<std::vector<int64_t>>& ids,
                                                const std::vector<std::vector<int64_t>>& lookup_ns,
                                                const std::vector<int64_t>& update_ns) {
  check_shape(plan, ids, "ids");
  check_shape(plan, lookup_ns, "lookup ns");
  const auto W = static_cast<size_t>(std::max(plan.world_size, 0));
  if (update_ns.size() != W)
    throw std::invalid_argument(fmt::format("shard work: update ns of {} ranks, the plan has {}", update_ns.size(), W));
  std::vector<int64_t> rank_ids(W, 0), rank_shards(W, 0);
  for (size_t t = 0; t < plan.tables.size(); ++t)
    for (size_t s = 0; s < plan.tables[t].shards.size(); ++s) {
      const int r = plan.tables[t].shards[s].rank;
      if (r < 0 || static_cast<size_t>(r) >= W) continue;
      rank_ids[static_cast<size_t>(r)] += ids[t][s];
      ++rank_shards[static_cast<size_t>(r)];
    }
  std::vector<std::vector<int64_t>> out(plan.tables.size());
  for (size_t t = 0; t < plan.tables.size(); ++t) {
    out[t].resize(plan.tables[t].shards.size());
    for (size_t s = 0; s < out[t].size(); ++s) {
      const int r = plan.tables[t].shards[s].rank;
      double share = 0;
      if (r >= 0 && static_cast<size_t>(r) < W) {
        const auto ur = static_cast<size_t>(r);
        share = rank_ids[ur] > 0 ? static_cast<double>(update_ns[ur]) * static_cast<double>(ids[t][s]) /
                                       static_cast<double>(rank_ids[ur])
                                 : static_cast<double>(update_ns[ur]) / static_cast<double>(rank_shards[ur]);
      }
      out[t][s] = lookup_ns[t][s] + std::llround(share);
    }
  }
  return out;
}

std::vector<int64_t> work_per_rank(const ShardingPlan& current, const ShardingPlan& next,
                                   const std::vector<std::vector<int64_t>>& work,
                                   const std::vector<std::vector<RowCount>>& row_counts) {
  check_shape(current, work, "work");
  if (next.tables.size() != current.tables.size())
    throw std::invalid_argument(fmt::format("shard work: the plans have {} and {} tables", current.tables.size(),
                                            next.tables.size()));
  std::vector<int64_t> out(static_cast<size_t>(std::max(next.world_size, 0)), 0);
  auto add = [&](int rank, int64_t v) {
    if (rank >= 0 && static_cast<size_t>(rank) < out.size()) out[static_cast<size_t>(rank)] += v;
  };
  for (size_t t = 0; t < next.tables.size(); ++t) {
    const TablePlan& now = current.tables[t];
    const TablePlan& tp = next.tables[t];
    if (tp.shards.empty()) continue;
    if (tp.type == now.type && tp.shards.size() == now.shards.size()) {
      for (size_t s = 0; s < tp.shards.size(); ++s) add(tp.shards[s].rank, work[t][s]);
      continue;
    }
    int64_t total = 0;
    for (int64_t v : work[t]) total += v;
    std::vector<int64_t> per;
    if (tp.type == ShardingType::row_wise)
      per = t < row_counts.size() ? row_wise_predicted_ids(total, tp, row_counts[t]) : row_wise_predicted_ids(total, tp);
    else if (tp.type == ShardingType::column_wise)
      per = column_wise_predicted_load(total, tp);
    else if (tp.type == ShardingType::table_wise)
      per.assign(1, total);
    else {
      const auto n = static_cast<int64_t>(tp.shards.size());
      per.assign(tp.shards.size(), total / n);
      per[0] += total - total / n * n;
    }
    for (size_t s = 0; s < tp.shards.size() && s < per.size(); ++s) add(tp.shards[s].rank, per[s]);
  }
  return out;
}

}  // namespace embedscope::engine::rebalance
