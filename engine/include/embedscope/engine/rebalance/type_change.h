#pragma once
// A hot table changed from table_wise to row_wise by a live rebalance (issue 17): the row_wise
// plan of the table, the bytes that leave the rank that held it whole, and the predicted load of
// its row shards. Pure functions; the policy (policy.h propose) and the executor's reshard
// (reshard.h row_transfers) use them.

#include <cstdint>
#include <vector>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::rebalance {

/// Table `table` as row_wise over ranks 0..world-1: shard r on rank r holds the rows of
/// even_split(rows, world) (TorchRec's row-wise split, larger blocks first), all columns - the
/// plan plan_sharding makes for a row_wise table. 10 rows over 4 ranks: rows {0-2, 3-5, 6-7, 8-9}.
/// Throws std::out_of_range for a table index outside spec.tables, std::invalid_argument if world < 1.
TablePlan row_wise_table_plan(const WorkloadSpec& spec, int table, int world);

/// Bytes of one row of table `table` with its optimizer state: row_bytes(data_type, dim) +
/// optimizer_state_floats(type, 1, dim) x 4. 16 fp32 columns with rowwise_adagrad: 64 + 4 = 68.
int64_t row_move_bytes(const WorkloadSpec& spec, int table);

/// Bytes that changing table_wise table `table` on rank `from` to row_wise_table_plan(world)
/// moves: the rows of every shard not on `from` x row_move_bytes (the shard on `from` stays).
/// 1000 rows x 16 fp32, rowwise_adagrad, 4 ranks, from 0: 750 x 68 = 51000.
int64_t row_wise_change_bytes(const WorkloadSpec& spec, int table, int from, int world);

/// The ids of a table observed as `ids` predicted per shard of `tp` in proportion to each
/// shard's rows (uniformly spread ids; skewed ids that favour some rows land unevenly, which the
/// observed imbalance after the rebalance shows): floor(ids x num_rows / rows), the remainder one
/// each to the first shards. 10 ids over shards of {3, 3, 2, 2} rows: {3, 3, 2, 2}; 7 ids: {3, 2, 1, 1}.
/// Throws std::invalid_argument when the shards hold no rows.
std::vector<int64_t> row_wise_predicted_ids(int64_t ids, const TablePlan& tp);

}  // namespace embedscope::engine::rebalance
