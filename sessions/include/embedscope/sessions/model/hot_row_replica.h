#pragma once
// The load counter of a rank's hot-row replica (sessions/schema/FORMAT.md load_counters.shard).

#include <cstdint>

namespace embedscope::sessions {

/// LoadCounter::shard of a rank's replica of a table's hot rows (the workload's
/// sharding.tables.NAME.hot_rows, held by every rank outside the plan's shards;
/// engine/sharding/hot_rows.cpp): the ids of the rank's own batch that it looked up there, so
/// that every id looked up is counted once, on the rank that served it (tester49 F8a: they were in
/// no load counter, so `stats`, the Load view and the Sharding plan left them out). Not an index
/// into the plan's shards: readers that charge a plan's shards skip it (`rebalance`: no move
/// changes a replica), readers of a rank's load count it.
inline constexpr int32_t kHotRowReplicaShard = -1;

}  // namespace embedscope::sessions
