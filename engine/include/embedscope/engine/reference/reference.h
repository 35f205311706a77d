#pragma once
// The unsharded single-rank reference: the same model, data and optimizer as run_training,
// computed with plain loops over whole tables (no sharding, no communication). Parity tests
// compare every sharding type against it.

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/input/source.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

struct ReferenceResult {
  /// pooled[iteration][rank][feature]: B x embedding_dim forward outputs.
  std::vector<std::vector<std::vector<std::vector<float>>>> pooled;
  std::vector<std::vector<float>> tables;  ///< num_embeddings x embedding_dim per table, after training
  std::vector<float> dense_params;
  std::vector<double> loss;                ///< per iteration, mean over the global batch
};

/// spec.pipeline semi_sync: batch 0 is looked up in the initial tables and batch i >= 1 in the
/// tables as they were before batch i-1's embedding update (one step of staleness; the dense
/// part and the optimizer state are not stale), as the semi_sync pipeline runs it. base and
/// sparse_dist train the same model. spec.qcomms: the pooled outputs of sharded (not
/// data_parallel) tables are rounded to forward_precision, and their pooled gradients (of the
/// global mean loss, i.e. divided by devices.count) to backward_precision, as the collectives
/// round them (sharded row_wise / table_row_wise sums round per-rank partial sums instead, which
/// the parity tests allow for).
/// Tables with a reduced-precision data_type (TableSpec::data_type) hold the stored form of their
/// rows: the initial rows and every updated row are rounded as the shard stores them (fp16 /
/// bf16 per value, int8 per row and column shard, FBGEMM's fused 8-bit code; quant/row_codec.h),
/// the update itself computed from the stored values in double.
/// Low-rank tables (TableSpec::low_rank_dim): A and B in double, the lookup reads A B, and each
/// step updates both from the full rows' gradient (reference/low_rank_reference.h).
/// Trains `iterations` steps on the global batch (devices.count local batches) with whole
/// tables. `plan` only supplies FBGEMM's per-shard row-wise state: under column_wise sharding
/// rowwise_adagrad keeps one accumulator per row and column shard (as TorchRec does), and the
/// reference does the same; pass nullptr for one accumulator per row.
/// `column_groups`: live rebalances that changed a table to or from column_wise (issue 17), in
/// iteration order. From `iteration` on, table `table`'s rowwise_adagrad keeps one accumulator
/// per row and column group of `groups` ((first column, width), covering the columns once);
/// before it, what `plan` (or an earlier change) gave. At the change a row's accumulator of each
/// new group is the column-weighted mean of the accumulators of the old groups it overlaps: the
/// old value itself when a table is split by columns (table_wise -> column_wise), as the live
/// reshard copies it to every column shard. Ignored by the other optimizers (their state is per
/// value). Throws std::invalid_argument for a table index outside spec.tables or groups that do
/// not cover the columns.
struct ColumnGroupChange {
  int64_t iteration = 0;
  int table = 0;
  std::vector<std::pair<int64_t, int64_t>> groups;
};
ReferenceResult run_reference(const WorkloadSpec& spec, int64_t iterations, const ShardingPlan* plan = nullptr,
                              const std::function<std::optional<Batch>(int64_t, int)>& batch_source = {},
                              const std::vector<ColumnGroupChange>& column_groups = {});

}  // namespace embedscope::engine
