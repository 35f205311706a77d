#pragma once
// Why the planner's search does not let an open table take a sharding type (planner/search.cpp
// Search's allowed types), for its refusal when PlanSearchOptions::sharding_types leaves a table
// none (tester55 F3: `scaling --shardings column_wise` on 1 GPU listed what the table allows,
// not why column_wise is not among them).

#include <string>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::planner_detail {

/// One clause naming `type` and the reason `table` on `world` ranks does not allow it, the
/// search's rules: a low-rank table allows table_wise, row_wise, data_parallel; a table in host
/// memory table_wise, row_wise, column_wise; column splits (column_wise, table_column_wise,
/// grid_shard) need embedding_dim >= 8; column_wise and table_column_wise need 2 ranks or more.
/// Example: column_wise, 1 rank: "column_wise splits a table's columns over 2 ranks or more: on
/// 1 rank its one column shard would hold every column, which is table_wise". A type no rule
/// refuses: "<type> is not allowed for it". Never throws but std::bad_alloc.
std::string type_refusal(const TableSpec& table, ShardingType type, int world);

}  // namespace embedscope::engine::planner_detail
