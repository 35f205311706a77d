#pragma once
// Ranks a sharding plan leaves without embedding rows (table_wise with more ranks than tables, a
// row split of a table with fewer rows than ranks, explicit placements): they hold nothing to look
// up but still join every collective. `plan`, `run` and `scaling` name them in a note.

#include <string>
#include <vector>

#include "embedscope/engine/sharding/sharding.h"

namespace embedscope::engine {

/// The ranks in [0, plan.world_size) that hold no shard with num_rows > 0 and num_cols > 0,
/// ascending. 4 table_wise tables on ranks 0-3 of 8: {4, 5, 6, 7}. O(shards + world_size).
std::vector<int> ranks_without_rows(const ShardingPlan& plan);

/// Ranks (ascending, distinct) folded into runs: {4, 5, 6, 7} -> "ranks 4-7"; {5} -> "rank 5";
/// {1, 3, 4} -> "ranks 1, 3-4"; {} -> "".
std::string format_rank_list(const std::vector<int>& ranks);

/// One line (no trailing newline) naming the ranks of `plan` that hold no embedding rows and
/// what to try, or "" when every rank holds some. Example, 4 table_wise tables on 8 ranks:
/// "note: ranks 4-7 (4 of 8) hold no embedding rows (4 tables over 8 ranks): they look nothing
/// up but still join every collective (the embedding all-to-alls and the dense all-reduce); to
/// give them work shard the largest tables row_wise, table_row_wise or column_wise (`plan --auto`
/// chooses), or use fewer devices".
std::string idle_ranks_note(const ShardingPlan& plan);

}  // namespace embedscope::engine
