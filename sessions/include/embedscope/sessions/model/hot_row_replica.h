#pragma once
// The load counter of a rank's hot-row replica (sessions/schema/FORMAT.md load_counters.shard).

#include <cstdint>
#include <map>
#include <vector>
#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {

/// LoadCounter::shard of a rank's replica of a table's hot rows (the workload's
/// sharding.tables.NAME.hot_rows, held by every rank outside the plan's shards;
/// engine/sharding/hot_rows.cpp): the ids of the rank's own batch that it looked up there, so
/// that every id looked up is counted once, on the rank that served it (tester49 F8a: they were in
/// no load counter, so `stats`, the Load view and the Sharding plan left them out). Not an index
/// into the plan's shards: readers that charge a plan's shards skip it (`rebalance`: no move
/// changes a replica), readers of a rank's load count it.
inline constexpr int32_t kHotRowReplicaShard = -1;

/// The ids looked up in the hot-row replicas, summed over the ranks and the measured steps
/// [0, steps) (`load` as SessionReader::load() reads it): table index (into the workload's
/// tables) -> ids. Tables without a replica counter are absent. The ids a step kept off the input
/// all-to-all, as table_storage_json's hot_ids counts them on cpu ranks; a simulated session has
/// no hot_ids (null) but these counters (its modelled ids a step; tester49 F8a, retest49 R4).
inline std::map<int32_t, int64_t> hot_row_replica_ids(const std::vector<LoadCounter>& load, int64_t steps) {
  std::map<int32_t, int64_t> ids;
  for (const LoadCounter& c : load)
    if (c.shard == kHotRowReplicaShard && c.step >= 0 && c.step < steps) ids[c.table] += c.ids;
  return ids;
}

}  // namespace embedscope::sessions
