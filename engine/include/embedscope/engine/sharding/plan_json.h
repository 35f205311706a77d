#pragma once
// A sharding plan read from JSON (`embedscope run --plan PLAN.json`): the document that
// `embedscope plan --json` prints, possibly edited by hand, checked against the workload so
// that the executors can trust every shard.

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// Reads a plan in the format of to_json(spec, plan):
///   {"world_size": W, "local_world_size": L, "tables": [{"name": "t0", "sharding_type":
///    "table_wise", "node": 0 (table_row_wise only), "shards": [{"rank", "row_offset",
///    "num_rows", "col_offset", "num_cols"}, ...]}, ...]}
/// The keys `plan --json` adds for reading are accepted: "memory", "table_storage", "fits",
/// "ended", "error", "backend", "backend_requested" and "gpu_placement" are ignored;
/// `plan --auto --allow-storage`'s "storage_changes" must match the workload's tables (the caller
/// applies them first: planner/storage_fallback.h apply_storage_changes), else SpecError
/// "p.json: /storage_changes/0: table \"big\" is int8 device in the plan but fp32 device in the
/// workload; ..."; "storage_reason" and "storage_searches" are ignored; "pipeline", "qcomms" and "network" must match the workload (which
/// decides them; objects key by key, a key left out is not checked), else SpecError
/// "p.json: /pipeline: \"semi_sync\" differs from the workload's \"base\"; ...". Any other key
/// is an error. Tables are
/// matched by name and may come in any order; every table of the workload must appear once.
/// The plan is validated (validate_plan). Throws SpecError "<origin>: <json pointer>: <reason>",
/// e.g. "p.json: /tables/1/shards/0: rows [0, 120) are outside table t1 (100 rows)".
ShardingPlan plan_from_json(const WorkloadSpec& spec, const nlohmann::json& j, const std::string& origin);

/// Reads and parses a plan file (plan_from_json); SpecError names the file, and the line of a
/// JSON syntax error.
ShardingPlan load_plan_file(const WorkloadSpec& spec, const std::string& path);

/// Checks that a plan can run the workload: world_size = devices.count, local_world_size
/// divides it, one TablePlan per table in table order, and per sharding type the shards the
/// executors expect:
///  - every shard inside its table (rows and columns), ranks in [0, world_size), num_cols > 0;
///  - data_parallel: one full replica on every rank;
///  - table_wise: one shard with all rows and columns;
///  - row_wise: one shard per rank, all columns, the row ranges covering the table exactly once
///    (no overlap, no gap; a rank may hold 0 rows);
///  - table_row_wise: node in [0, nodes), one shard per rank of that node, rows as row_wise;
///  - column_wise: all rows, column ranges covering the columns exactly once;
///  - table_column_wise: as column_wise, node in [0, nodes) and every shard on a rank of it;
///  - grid_shard: column blocks (shards with the same columns) covering the columns exactly
///    once, each block one shard on each rank of one node with rows as row_wise (two blocks
///    may share a node).
/// Throws SpecError "<origin>: /tables/<i>[/shards/<k>]: <reason>" naming the table.
void validate_plan(const WorkloadSpec& spec, const ShardingPlan& plan, const std::string& origin);

}  // namespace embedscope::engine
