// The plan of a session at a measured step (embedscope/sessions/analysis/plan_at_step.h).
#include "embedscope/sessions/analysis/plan_at_step.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace embedscope::sessions {

std::vector<ShardRecord> shards_at(const std::vector<ShardRecord>& initial, const std::vector<PlanChangeRecord>& changes,
                                   int64_t step) {
  // per table (in initial's order of first appearance) its shards
  std::vector<int32_t> order;
  std::map<int32_t, std::vector<ShardRecord>> tables;
  std::map<int32_t, std::pair<int64_t, int64_t>> dims;  // table -> rows, columns (from the initial shards)
  for (const auto& s : initial) {
    if (!tables.count(s.table)) order.push_back(s.table);
    tables[s.table].push_back(s);
    auto& d = dims[s.table];
    d.first = std::max(d.first, s.row_offset + s.num_rows);
    d.second = std::max(d.second, s.col_offset + s.num_cols);
  }
  std::vector<PlanChangeRecord> sorted = changes;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return std::tie(a.step, a.table, a.shard_index) < std::tie(b.step, b.table, b.shard_index);
  });
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto& c = sorted[i];
    if (c.step > step) break;
    auto it = tables.find(c.table);
    if (it == tables.end()) continue;  // a change of a table the plan does not have: nothing to place
    auto& shards = it->second;
    if (c.from_type == c.to_type) {  // a whole shard to another rank
      for (auto& s : shards)
        if (s.shard_index == c.shard_index) s.rank = c.to_rank;
      continue;
    }
    // a change of type: the first row of this (step, table) replaces the table's shards with
    // all of them
    if (i > 0 && sorted[i - 1].step == c.step && sorted[i - 1].table == c.table) continue;
    const ShardRecord model = shards.front();
    const auto [rows, cols] = dims[c.table];
    shards.clear();
    for (size_t k = i; k < sorted.size() && sorted[k].step == c.step && sorted[k].table == c.table; ++k) {
      const auto& x = sorted[k];
      ShardRecord s;
      s.table = x.table;
      s.table_name = model.table_name;
      s.sharding_type = x.to_type;
      s.shard_index = x.shard_index;
      s.rank = x.to_rank;
      s.row_offset = x.num_rows > 0 ? x.row_offset : 0;
      s.num_rows = x.num_rows > 0 ? x.num_rows : rows;
      s.col_offset = x.num_cols > 0 ? x.col_offset : 0;
      s.num_cols = x.num_cols > 0 ? x.num_cols : cols;
      shards.push_back(std::move(s));
    }
  }
  std::vector<ShardRecord> out;
  for (int32_t t : order) {
    auto& shards = tables[t];
    std::stable_sort(shards.begin(), shards.end(), [](const auto& a, const auto& b) { return a.shard_index < b.shard_index; });
    out.insert(out.end(), shards.begin(), shards.end());
  }
  return out;
}

}  // namespace embedscope::sessions
