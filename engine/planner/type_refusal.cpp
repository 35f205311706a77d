// Why the search does not let a table take a sharding type (planner/type_refusal.h).
#include "planner/type_refusal.h"

#include <fmt/format.h>

namespace embedscope::engine::planner_detail {

std::string type_refusal(const TableSpec& table, ShardingType t, int world) {
  const std::string name(to_string(t));
  const bool columns = t == ShardingType::column_wise || t == ShardingType::table_column_wise || t == ShardingType::grid_shard;
  if (table.low_rank_dim > 0)
    return fmt::format("{}: a low-rank table (low_rank_dim {}) is sharded table_wise, row_wise or data_parallel (its "
                       "rows of A split, B whole on every shard)", name, table.low_rank_dim);
  if (table.placement != TablePlacement::device && t != ShardingType::column_wise)
    return fmt::format("{}: a table in host memory (placement {}) is sharded table_wise, row_wise or column_wise", name,
                       to_string(table.placement));
  if (columns && table.embedding_dim < 8)
    return fmt::format("{} needs embedding_dim >= 8 (two column shards of at least 4 columns); the table has {}", name,
                       table.embedding_dim);
  if ((t == ShardingType::column_wise || t == ShardingType::table_column_wise) && world < 2)
    return fmt::format("{} splits a table's columns over 2 ranks or more: on 1 rank its one column shard would hold "
                       "every column, which is table_wise", name);
  return fmt::format("{} is not allowed for it", name);
}

}  // namespace embedscope::engine::planner_detail
