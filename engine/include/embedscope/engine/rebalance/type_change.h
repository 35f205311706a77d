#pragma once
// A hot table changed from table_wise to row_wise or column_wise by a live rebalance (issue 17):
// the new plan of the table, the bytes that leave the rank that held it whole, and the predicted
// load of its row or column shards. Pure functions; the policy (policy.h propose) and the executor's reshard
// (reshard.h row_transfers) use them.

#include <cstdint>
#include <vector>

#include "embedscope/engine/rebalance/hot_rows.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::rebalance {

/// Table `table` as row_wise over ranks 0..world-1: shard r on rank r holds the rows of
/// row_wise_split(rows, world) (TorchRec's row-wise split: ceil(rows / world) a rank, the
/// remainder next, then empty shards), all columns - the plan plan_sharding makes for a row_wise
/// table. 10 rows over 4 ranks: rows {0-2, 3-5, 6-8, 9}.
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

/// The same from the observed ids per row (`rows`: blocks of the table's rows with their ids,
/// e.g. its id_histogram buckets; any order, disjoint): each shard's weight is the ids of the
/// blocks within its rows, a block across a shard boundary shared in proportion to the rows on
/// each side (weights in 2^-20 ids, rounded down); `ids` is spread by those weights as above.
/// Falls back to row_wise_predicted_ids(ids, tp) when `rows` holds no ids. Example: 100 ids,
/// shards of rows {0-4, 5-9}, blocks {[0, 5): 30, [5, 10): 10}: {75, 25}; a block [3, 7) of 8
/// ids: {50, 50}. Throws std::invalid_argument when the shards hold no rows.
std::vector<int64_t> row_wise_predicted_ids(int64_t ids, const TablePlan& tp, const std::vector<RowCount>& rows);

/// Table `table`, table_wise on rank `from`, as column_wise: column_split(embedding_dim, parts)
/// blocks (multiples of 4 columns where the width allows; sharding.h) with parts = min(1 +
/// others.size(), max(1, embedding_dim / 4)) - the planner's block count for a column_wise table
/// without ranks - block 0 on `from` (its columns stay), block i on others[i - 1]; every block
/// holds all rows. Example: 16 columns, from 3, others {0, 1, 2}: columns 0-3 on rank 3, 4-7 on
/// 0, 8-11 on 1, 12-15 on 2. One block (fewer than 8 columns or no other rank) is table_wise's
/// layout: the caller does not change such a table. Throws std::out_of_range for a table index
/// outside spec.tables.
TablePlan column_wise_table_plan(const WorkloadSpec& spec, int table, int from, const std::vector<int>& others);

/// Bytes of `rows` rows x `cols` columns of table `table` with the optimizer state a shard of
/// that width keeps: rows x (row_bytes(data_type, cols) + optimizer_state_floats(type, 1, cols) x
/// 4). FBGEMM keeps rowwise_adagrad's accumulator per row of each shard, so every column block
/// carries one float a row: 1000 rows x 8 fp32 columns, rowwise_adagrad: 1000 x (32 + 4) = 36000.
int64_t block_move_bytes(const WorkloadSpec& spec, int table, int64_t rows, int64_t cols);

/// Bytes that changing table_wise table `tp.table` on rank `from` into the shards of `tp` moves:
/// block_move_bytes of every shard not on `from` (the one on `from` is copied in place).
/// For a row_wise `tp` this is row_wise_change_bytes.
int64_t change_bytes(const WorkloadSpec& spec, const TablePlan& tp, int from);

/// The load of a table observed as `load` predicted per column shard of `tp` in proportion to
/// its columns (each shard reads its columns of every id the table is asked for, so its work is
/// that share of the table's): floor(load x num_cols / cols), the remainder one each to the first
/// shards. 10 over shards of {8, 4, 4} columns: {5, 2, 2} and the remainder 1 to the first:
/// {6, 2, 2}. Throws std::invalid_argument when the shards hold no columns.
std::vector<int64_t> column_wise_predicted_load(int64_t load, const TablePlan& tp);

}  // namespace embedscope::engine::rebalance
