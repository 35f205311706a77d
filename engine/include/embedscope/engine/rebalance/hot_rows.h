#pragma once
// Hot-row replication advice (issue 17, the hybrid of HugeCTR's hybrid embedding and of the
// FBGEMM/TorchRec caching of hot rows): which rows of a row_wise / table_row_wise / grid_shard table
// are worth holding on every rank, from the ids observed per row. choose_hot_rows is a pure function
// of its arguments; resolve_hot_rows applies it to a workload's automatic hot rows
// (TableSharding::hot_rows_sample_steps) from the ids of the run's first iterations, and the run
// replicates the rows (sharding/hot_rows.cpp).
//
// The cost model, per measured step, in values (one id or one embedding element; fp32 / int32
// values are 4 bytes each on the wire), for a row of `dim` columns on a table sharded over W ranks:
//  - kept model-parallel, each of the row's c ids travels in the input all-to-all (1 value) to
//    the rank owning the row. Its pooled output leaves that rank only if the whole bag is hot
//    (a bag with any cold id still needs the owner's partial sum), so the saving is counted as
//    the id alone: c values saved per step (a lower bound; pooled-output savings are ignored);
//  - replicated on all W ranks, every rank contributes the row's gradient (dim values) and its
//    update count (1 value) to the all-reduce that keeps the replicas equal: W x (dim + 1)
//    values per step.
// So a row is replicated when c > W x (dim + 1) (strictly; c in ids per step summed over all
// ranks). A grid_shard table sends each id to every column block's row shard, so replication
// saves c x blocks values there; the same threshold is kept (the saving's lower bound again). A block of k rows observed only in sum (a bucket of the session's id_histogram:
// tables over 256 rows are cut into 256 buckets) is judged on its mean: C ids over S steps
// qualify when C > S x k x W x (dim + 1), exact in integers.
// Example: W = 4, dim = 8 -> threshold 36 ids per row per step; over S = 2 steps a single row
// with 73 ids qualifies (73 > 72), one with 72 does not; a bucket of 4 rows needs > 288.

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "embedscope/engine/input/input.h"

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::rebalance {

/// Ids observed in rows [row_begin, row_end) of one table, summed over ranks and steps.
struct RowCount {
  int64_t row_begin = 0;
  int64_t row_end = 0;  ///< one past the last row; row_end > row_begin
  int64_t ids = 0;      ///< >= 0
};

/// The rows of one table worth replicating.
struct HotRowAdvice {
  int table = 0;                       ///< index into WorkloadSpec::tables
  ShardingType type = ShardingType::row_wise;  ///< the table's type in the plan
  int64_t threshold_ids_per_row_step = 0;      ///< W x (dim + 1): a row needs more ids per step
  std::vector<RowCount> rows;          ///< the replicated blocks, in row order
  int64_t num_rows = 0;                ///< rows replicated (sum of the blocks' rows)
  int64_t ids = 0;                     ///< their ids over the observed steps
  /// Bytes every rank holds for the replicas: num_rows x row_move_bytes (weights in the table's
  /// data_type + optimizer state, type_change.h).
  int64_t bytes_per_rank = 0;
  double ids_saved_per_step = 0;       ///< ids / steps: ids that no longer cross the input all-to-all
  double sync_values_per_step = 0;     ///< num_rows x W x (dim + 1): what the all-reduce adds
};

/// The hot-row advice for every row_wise, table_row_wise and grid_shard table of `plan` (other
/// types are skipped: table_wise / column_wise / table_column_wise tables are not split by rows,
/// data_parallel is replicated already), in table order; a table with no qualifying row is left out. `counts[t]` are table
/// t's observed blocks (any order, disjoint, within [0, TableSpec::rows()); empty for no data),
/// over `steps` measured steps. W = plan.world_size.
/// Throws std::invalid_argument when counts.size() != spec.tables.size(), steps < 1, or a block
/// is empty, out of the table's rows, or has negative ids (the text names table and block).
std::vector<HotRowAdvice> choose_hot_rows(const WorkloadSpec& spec, const ShardingPlan& plan,
                                          const std::vector<std::vector<RowCount>>& counts, int64_t steps);

/// `spec` with the rows of every table whose hot rows are chosen automatically
/// (TableSharding::hot_rows_sample_steps = N > 0) filled in: the ids of iterations [0, N) of
/// every rank's batch - from `source` when given (TrainerOptions::batch_source; an empty
/// optional falls back to the spec's source), else make_batch_source(spec) - after the
/// invalid_ids policy and hashing, exactly what the run will train on, are counted per row, and
/// choose_hot_rows(spec, plan, counts, N) picks the rows (more than W x (dim + 1) ids a step).
/// Those tables get hot_rows = the chosen rows and hot_rows_sample_steps = 0, so the returned
/// spec (and the session's workload) lists the rows; a table where none is chosen keeps
/// hot_rows empty and its hot_rows_sample_steps (the session's workload keeps {"auto": true,
/// "sample_steps": N}, and `stats` says no row met the threshold). A spec without automatic tables
/// is returned unchanged, without reading any batch. Memory: one counter per distinct row of the
/// automatic tables. Throws what the source and apply_invalid_id_policy throw (bad files, invalid
/// ids under the error policy) and what choose_hot_rows throws.
WorkloadSpec resolve_hot_rows(const WorkloadSpec& spec, const ShardingPlan& plan,
                              const std::function<std::optional<Batch>(int64_t, int)>& source = {});

}  // namespace embedscope::engine::rebalance
