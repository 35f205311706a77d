#include "store/plan_json.h"

#include <nlohmann/json.hpp>

namespace embedscope::sessions::detail {

std::vector<ShardRecord> shards_from_plan_json(const std::string& text) {
  std::vector<ShardRecord> out;
  if (text.empty()) return out;
  const nlohmann::json plan = nlohmann::json::parse(text);
  if (!plan.is_object() || !plan.contains("tables")) return out;
  int32_t table = 0;
  for (const auto& t : plan.at("tables")) {
    int32_t index = 0;
    for (const auto& s : t.value("shards", nlohmann::json::array())) {
      ShardRecord r;
      r.table = table;
      r.table_name = t.value("name", "");
      r.sharding_type = t.value("sharding_type", "");
      r.node = t.value("node", -1);
      r.shard_index = index++;
      r.rank = s.value("rank", 0);
      r.row_offset = s.value("row_offset", int64_t{0});
      r.num_rows = s.value("num_rows", int64_t{0});
      r.col_offset = s.value("col_offset", int64_t{0});
      r.num_cols = s.value("num_cols", int64_t{0});
      r.planned_bytes = -1;
      out.push_back(std::move(r));
    }
    ++table;
  }
  return out;
}

}  // namespace embedscope::sessions::detail
