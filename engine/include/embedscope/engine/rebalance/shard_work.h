#pragma once
// The embedding work that moves with a shard, in ns, for the gain and verdict of `embedscope
// rebalance`: a shard's pooled lookups (load_counters.lookup_ns, recorded per shard) and its
// share of its rank's backward and fused optimizer update (the `backward_fused_optimizer` ops,
// recorded per rank: one op a step updates every shard the rank holds). A move takes both with
// the table: its ids are looked up, their gradients accumulated and their rows updated on the
// rank that holds it. On hot_table_straggler-like sessions the update is most of it (rank 3 of a
// tester's session: update 4.42 ms against lookup 0.25 ms a step; ~90 ns an id against ~6), so a
// gain counted in lookup time alone read "within the noise" for a move that paid.

#include <cstdint>
#include <vector>

#include "embedscope/engine/rebalance/hot_rows.h"
#include "embedscope/engine/sharding/sharding.h"

namespace embedscope::engine::rebalance {

/// Per (table, shard) of `plan` the ns of work that moves with the shard over a window:
/// lookup_ns[t][s] + update_ns[rank] x ids[t][s] / (the ids of every shard on that rank), rounded
/// to the nearest ns - the update's cost split over the rank's shards by their ids (each id's
/// gradient row is accumulated and its row updated; the per-id cost of a table is taken to be its
/// rank's mean). A rank that looked up no id but recorded update time splits it evenly over its
/// shards. `ids` and `lookup_ns` are indexed as ObservedLoad::ids (plan order; raw ids, not
/// column-weighted); `update_ns` has one entry per rank (world_size).
/// Example: rank 3 holds h0 (192 ids, 1920 ns lookup) and h1 (576 ids, 5760 ns), update 76,800 ns:
/// h0 1920 + 19,200 = 21,120, h1 5760 + 57,600 = 63,360.
/// Throws std::invalid_argument when the shapes differ from the plan's or update_ns.size() !=
/// world_size.
std::vector<std::vector<int64_t>> shard_work_ns(const ShardingPlan& plan, const std::vector<std::vector<int64_t>>& ids,
                                                const std::vector<std::vector<int64_t>>& lookup_ns,
                                                const std::vector<int64_t>& update_ns);

/// The work per rank under plan `next` of the shards' work `work` measured under `current` (the
/// plans' tables in the same order; `next` is a proposal of `current`): a table whose sharding
/// type and shard count are unchanged takes each shard's work to the rank that shard has in
/// `next` (a whole-table move takes it all); a table whose type changed has its total work
/// spread over its new shards as the policy predicts its load: table_wise whole on its rank,
/// row_wise by row_wise_predicted_ids (from `row_counts[t]` when given, else by rows),
/// column_wise by column_wise_predicted_load, any other type evenly. With next == current it is
/// the measured work per rank. Throws std::invalid_argument when the shapes differ.
std::vector<int64_t> work_per_rank(const ShardingPlan& current, const ShardingPlan& next,
                                   const std::vector<std::vector<int64_t>>& work,
                                   const std::vector<std::vector<RowCount>>& row_counts = {});

}  // namespace embedscope::engine::rebalance
