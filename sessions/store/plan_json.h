#pragma once
// The sharding plan of files before schema 4, which carry it only as the metadata
// `sharding_plan_json` (private to the sessions library; SessionReader::shards() uses it).

#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions::detail {

/// The shards of a plan in the JSON the engine writes: {"world_size", "local_world_size",
/// "tables": [{"name", "sharding_type", "node"?, "shards": [{"rank", "row_offset", "num_rows",
/// "col_offset", "num_cols"}]}]}. table = position in "tables", shard_index = position in its
/// "shards", node = "node" or -1, planned_bytes = -1; a missing number reads 0. "" or a plan
/// without "tables" gives no shards. Throws nlohmann::json::exception for text that is not
/// JSON, or values of the wrong type.
std::vector<ShardRecord> shards_from_plan_json(const std::string& text);

}  // namespace embedscope::sessions::detail
