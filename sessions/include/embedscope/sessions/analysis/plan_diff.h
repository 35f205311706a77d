#pragma once
// What moved between two recorded sharding plans, per table, in a user's words (tester42 F13:
// compare's "differs" line listed JSON pointers such as "sharding/tables/cold_0/ranks/0 (none)"
// and "placement 1 vs 2" where the one real difference was three tables moving off rank 3).

#include <string>
#include <vector>

namespace embedscope::sessions {

/// Per table, how the plan `other_json` places it differently from `base_json`. Both are
/// sharding plans as sessions record them (metadata sharding_plan_json, engine
/// sharding/plan_json.h): {"tables": [{"name", "sharding_type", "shards": [{"rank",
/// "row_offset", "num_rows", "col_offset", "num_cols"}, ...]}, ...]}. A table's placement is its
/// type and the sorted distinct ranks of its shards ("rank 3", "ranks 0-3", "ranks 0, 2, 5-6").
/// One entry per table that differs, in `other`'s table order, then the tables only `base` has:
///   same type, other ranks:  "hot_1: rank 3 -> rank 0 (table_wise)"
///   another type:            "t_cat_2: table_wise on rank 2 -> row_wise on ranks 0-3"
///   same type and ranks, other row or column ranges: "t: shards split differently (row_wise on ranks 0-3)"
///   only in one plan:        "t: not in the baseline's plan" / "t: only in the baseline's plan"
/// {} when the tables are placed alike (other keys of the plans - memory, pipeline - are not
/// compared). A plan that is not such an object (malformed, missing) has no tables. Never throws
/// except std::bad_alloc.
std::vector<std::string> plan_changes(const std::string& base_json, const std::string& other_json);

/// "rank 3", "ranks 0-3", "ranks 0, 2, 5-6" (sorted, distinct, runs of 3 or more consecutive
/// ranks as a range, a run of 2 as two ranks: "ranks 0, 1"); "no rank" for an empty list.
std::string ranks_text(std::vector<int> ranks);

}  // namespace embedscope::sessions
