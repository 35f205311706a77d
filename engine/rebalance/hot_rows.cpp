// Hot-row replication advice (rebalance/hot_rows.h): the rows whose ids per step exceed
// W x (dim + 1), from observed per-row (or per-bucket) counts.
#include "embedscope/engine/rebalance/hot_rows.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "embedscope/engine/input/hashing.h"
#include "embedscope/engine/input/source.h"
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

WorkloadSpec resolve_hot_rows(const WorkloadSpec& spec, const ShardingPlan& plan,
                              const std::function<std::optional<Batch>(int64_t, int)>& source) {
  WorkloadSpec out = spec;
  std::vector<int> auto_tables;  // table indices
  int64_t steps = 0;
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    const auto e = spec.sharding.per_table.find(spec.tables[t].name);
    if (e == spec.sharding.per_table.end() || e->second.hot_rows_sample_steps <= 0) continue;
    auto_tables.push_back(static_cast<int>(t));
    steps = std::max(steps, e->second.hot_rows_sample_steps);
  }
  if (auto_tables.empty()) return out;
  const FeatureIndex index(spec);
  std::vector<std::unordered_map<int64_t, int64_t>> per_row(spec.tables.size());
  std::vector<int64_t> table_steps(spec.tables.size(), 0);
  for (int t : auto_tables)
    table_steps[static_cast<size_t>(t)] = spec.sharding.per_table.at(spec.tables[static_cast<size_t>(t)].name).hot_rows_sample_steps;
  std::unique_ptr<BatchSource> own;
  for (int64_t it = 0; it < steps; ++it)
    for (int r = 0; r < spec.devices.count; ++r) {
      std::optional<Batch> b = source ? source(it, r) : std::nullopt;
      if (!b) {
        if (!own) own = make_batch_source(spec);
        b = own->make(it, r);
      }
      KJT& kjt = b->kjt;
      apply_invalid_id_policy(spec, kjt, r, b->origin);
      apply_hashing(spec, kjt);
      const std::vector<int64_t> off = kjt.offsets();
      const int64_t B = kjt.batch_size;
      for (int t : auto_tables) {
        if (it >= table_steps[static_cast<size_t>(t)]) continue;
        auto& counts = per_row[static_cast<size_t>(t)];
        for (const int f : index.features_of_table()[static_cast<size_t>(t)]) {
          if (f < 0) continue;
          for (int64_t k = off[static_cast<size_t>(f * B)]; k < off[static_cast<size_t>((f + 1) * B)]; ++k)
            ++counts[kjt.values[static_cast<size_t>(k)]];
        }
      }
    }
  for (int t : auto_tables) {
    std::vector<std::vector<RowCount>> counts(spec.tables.size());
    for (const auto& [row, n] : per_row[static_cast<size_t>(t)]) counts[static_cast<size_t>(t)].push_back({row, row + 1, n});
    TableSharding& ts = out.sharding.per_table.at(spec.tables[static_cast<size_t>(t)].name);
    ts.hot_rows.clear();
    for (const HotRowAdvice& a : choose_hot_rows(spec, plan, counts, table_steps[static_cast<size_t>(t)]))
      for (const RowCount& c : a.rows) ts.hot_rows.push_back(c.row_begin);  // blocks of one row each
    // the rows chosen replace the request; none chosen keeps it, so that the session's workload
    // still says hot rows were asked for (and `stats` can say none met the threshold)
    if (!ts.hot_rows.empty()) ts.hot_rows_sample_steps = 0;
  }
  return out;
}

}  // namespace embedscope::engine::rebalance
