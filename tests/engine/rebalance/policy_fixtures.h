#pragma once
// Small pieces the rebalancing policy tests share (policy_test, prune_moves_test,
// move_failure_test): an observed load of one shard per table, and each table's rank.

#include <cstdint>
#include <vector>

#include "embedscope/engine/rebalance/policy.h"

namespace embedscope::test_support {

/// An observed load of `ids[t]` ids on the one shard of each table t.
inline engine::rebalance::ObservedLoad table_load(const std::vector<int64_t>& ids) {
  engine::rebalance::ObservedLoad l;
  for (int64_t v : ids) l.ids.push_back({v});
  return l;
}

/// The rank of each table's first shard, in table order.
inline std::vector<int> first_shard_ranks(const engine::ShardingPlan& p) {
  std::vector<int> out;
  for (const engine::TablePlan& tp : p.tables) out.push_back(tp.shards.at(0).rank);
  return out;
}

}  // namespace embedscope::test_support
