// Ranks a sharding plan leaves without embedding rows, and the note that names them
// (sharding/idle_ranks.h).
#include "embedscope/engine/sharding/idle_ranks.h"

#include <algorithm>

#include <fmt/format.h>

namespace embedscope::engine {

std::vector<int> ranks_without_rows(const ShardingPlan& plan) {
  std::vector<bool> holds(static_cast<size_t>(std::max(plan.world_size, 0)), false);
  for (const TablePlan& tp : plan.tables)
    for (const Shard& s : tp.shards)
      if (s.num_rows > 0 && s.num_cols > 0 && s.rank >= 0 && s.rank < plan.world_size)
        holds[static_cast<size_t>(s.rank)] = true;
  std::vector<int> out;
  for (int r = 0; r < plan.world_size; ++r)
    if (!holds[static_cast<size_t>(r)]) out.push_back(r);
  return out;
}

std::string format_rank_list(const std::vector<int>& ranks) {
  if (ranks.empty()) return "";
  std::string runs;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    runs += fmt::format("{}{}", runs.empty() ? "" : ", ",
                        i == j ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", runs);
}

std::string idle_ranks_note(const ShardingPlan& plan) {
  const std::vector<int> idle = ranks_without_rows(plan);
  if (idle.empty()) return "";
  const bool one = idle.size() == 1;  // "rank 7 (1 of 8) holds ...: it looks ..."
  return fmt::format(
      "note: {} ({} of {}) {} no embedding rows ({} table{} over {} ranks): {} nothing up but still {} every "
      "collective (the embedding all-to-alls and the dense all-reduce); to give {} work shard the largest tables "
      "row_wise, table_row_wise or column_wise (`plan --auto` chooses), or use fewer devices",
      format_rank_list(idle), idle.size(), plan.world_size, one ? "holds" : "hold", plan.tables.size(),
      plan.tables.size() == 1 ? "" : "s", plan.world_size, one ? "it looks" : "they look", one ? "joins" : "join",
      one ? "it" : "them");
}

}  // namespace embedscope::engine
