// Hot-row replication advice (rebalance/hot_rows.h): the rows whose ids per step exceed
// W x (dim + 1), from observed per-row (or per-bucket) counts.
#include "embedscope/engine/rebalance/hot_rows.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/engine/rebalance/type_change.h"

namespace embedscope::engine::rebalance {

namespace {
__extension__ typedef __int128 hot_rows_i128;  // C > S k W (dim + 1) without overflow (GCC/Clang)
}  // namespace

std::vector<HotRowAdvice> choose_hot_rows(const WorkloadSpec& spec, const ShardingPlan& plan,
                                          const std::vector<std::vector<RowCount>>& counts, int64_t steps) {
  if (counts.size() != spec.tables.size())
    throw std::invalid_argument(fmt::format("hot rows: counts of {} tables for a workload of {}", counts.size(), spec.tables.size()));
  if (plan.tables.size() != spec.tables.size())
    throw std::invalid_argument(fmt::format("hot rows: a plan of {} tables for a workload of {}", plan.tables.size(), spec.tables.size()));
  if (steps < 1) throw std::invalid_argument(fmt::format("hot rows: steps must be >= 1, got {}", steps));
  const int64_t W = plan.world_size;
  std::vector<HotRowAdvice> out;
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    const TableSpec& ts = spec.tables[t];
    for (const RowCount& c : counts[t])
      if (c.row_begin < 0 || c.row_end <= c.row_begin || c.row_end > ts.rows() || c.ids < 0)
        throw std::invalid_argument(fmt::format("hot rows: table \"{}\" block [{}, {}) with {} ids: must be a non-empty "
                                                "row range within [0, {}) with ids >= 0",
                                                ts.name, c.row_begin, c.row_end, c.ids, ts.rows()));
    const ShardingType type = plan.tables[t].type;
    if (type != ShardingType::row_wise && type != ShardingType::table_row_wise && type != ShardingType::grid_shard)
      continue;
    HotRowAdvice a;
    a.table = static_cast<int>(t);
    a.type = type;
    a.threshold_ids_per_row_step = W * (ts.embedding_dim + 1);
    for (const RowCount& c : counts[t]) {
      const int64_t k = c.row_end - c.row_begin;
      // C > S k W (dim + 1), in 128 bits: k up to 2^40 rows, S up to 1e9 steps
      const hot_rows_i128 need = static_cast<hot_rows_i128>(steps) * k * a.threshold_ids_per_row_step;
      if (static_cast<hot_rows_i128>(c.ids) > need) a.rows.push_back(c);
    }
    if (a.rows.empty()) continue;
    std::sort(a.rows.begin(), a.rows.end(), [](const RowCount& x, const RowCount& y) { return x.row_begin < y.row_begin; });
    for (const RowCount& c : a.rows) {
      a.num_rows += c.row_end - c.row_begin;
      a.ids += c.ids;
    }
    a.bytes_per_rank = a.num_rows * row_move_bytes(spec, a.table);
    a.ids_saved_per_step = static_cast<double>(a.ids) / static_cast<double>(steps);
    a.sync_values_per_step = static_cast<double>(a.num_rows) * static_cast<double>(a.threshold_ids_per_row_step);
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace embedscope::engine::rebalance
