#pragma once
// What a simulated run records besides its ops' times (exec/simulated/executor.h): the planned
// storage of every table, each rank's memory counter from the planner's replay of its allocator,
// and the expected load counters of a rank's step (the ids, bytes and cache traffic the cost
// model expects of each of its shards). The executor times the ops; these fill the rest of the
// session and RunResult from the plan and the workload alone.

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "embedscope/engine/cost/cache_model.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/sessions/model/events.h"
#include "planner/memory_replay.h"
#include "sharding/layout.h"

namespace embedscope::engine::simulated {

/// RunResult::table_storage of a simulated run, one entry per table (spec order), each figure a
/// vector of `W` ranks, bytes: the plan's shards (shard_weight_bytes / shard_optimizer_state_bytes,
/// as the memory estimate counts them), plus the hot-row replicas every rank holds and, for tables
/// in host memory, the host bytes and the device caches. The error and collision figures stay 0:
/// nothing is stored or hashed (the session and `run --json` write them as null:
/// table_storage_json(.., false)); the cache figures are added by expected_load_counters.
std::vector<RunResult::TableStorage> planned_table_storage(const WorkloadSpec& spec, const ShardingPlan& plan,
                                                           const detail::Layout& layout, int W);

/// The memory counter of a rank's end of iteration `it` (bytes): the planner's replay of the
/// rank's allocator (planner/memory_replay.h ReplayedMemory::step_ends) at that iteration's end -
/// allocated, reserved, segments, largest free block, fragmentation, as a run's rank records its
/// allocator (threaded/memory_records.h) - or at the last replayed one's for an iteration after
/// the replayed first min(iterations, 8) (the steady state's; a pipeline's drain in the last two
/// is not replayed). The peaks are the whole replay's at every step: peak allocated the
/// estimate's total (`plan`'s total, the step rows' figure), peak reserved the replay's
/// peak_reserved (`plan --json`'s reserved_bytes). With no replayed step every figure is e.total().
void fill_replayed_counter(sessions::MemoryCounter& m, const detail::ReplayedMemory& rm, const DeviceMemoryEstimate& e,
                           int64_t it);

/// A rank's lookups in one simulated step (the phases of its schedule, their simulated time).
struct StepLookups {
  int own = 0;               ///< lookup phases of the step itself
  int fill = 0;              ///< lookup phases of the pipeline's fill, recorded at step - 1
  int64_t ns = 0;            ///< the step's lookup ops' time, ns
  int64_t fill_ns = 0;       ///< the fill's lookup ops' time, ns
};

/// Cache model estimates already made: (rank, table, shard, lookups before or -1) -> estimate.
using CacheMemo = std::map<std::tuple<int, int, int, int64_t>, CacheEstimate>;

/// The load counters of rank `r`'s iteration `it` (recorded as `step`): one per local shard,
/// its expected ids (program/program_sink.h expected_slot_ids, rounded cumulatively so that the
/// rank's counters add up to round(its expected ids), the program's lookup rows), bytes in and
/// out, lookup_ns (the step's lookup time `lk.ns` shared by each shard's lookup bytes) and, for
/// tables in host memory, the cache model's hits, misses and host-link bytes (cost/cache_model.h;
/// `cold_iterations` the iterations whose caches still fill). A step with no lookup of its own
/// gets every counter at 0 ids; a pipeline fill's lookups (lk.fill > 0) add a copy at step - 1.
/// For a `measured` step with lookups, the cache figures are added to `storage` (the run's
/// totals, RunResult::TableStorage). `memo` keeps the cache estimates across steps.
/// O(slots of r + its host shards' features).
std::vector<sessions::LoadCounter> expected_load_counters(const WorkloadSpec& spec, const detail::Layout& layout, int r,
                                                          int64_t it, int64_t step, int64_t cold_iterations,
                                                          const StepLookups& lk, bool measured, CacheMemo& memo,
                                                          std::vector<RunResult::TableStorage>& storage);

}  // namespace embedscope::engine::simulated
