#pragma once
// The unsharded single-rank reference: the same model, data and optimizer as run_training,
// computed with plain loops over whole tables (no sharding, no communication). Parity tests
// compare every sharding type against it.

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "embedscope/engine/input.h"
#include "embedscope/engine/sharding.h"
#include "embedscope/engine/spec.h"

namespace embedscope::engine {

struct ReferenceResult {
  /// pooled[iteration][rank][feature]: B x embedding_dim forward outputs.
  std::vector<std::vector<std::vector<std::vector<float>>>> pooled;
  std::vector<std::vector<float>> tables;  ///< num_embeddings x embedding_dim per table, after training
  std::vector<float> dense_params;
  std::vector<double> loss;                ///< per iteration, mean over the global batch
};

/// Trains `iterations` steps on the global batch (devices.count local batches) with whole
/// tables. `plan` only supplies FBGEMM's per-shard row-wise state: under column_wise sharding
/// rowwise_adagrad keeps one accumulator per row and column shard (as TorchRec does), and the
/// reference does the same; pass nullptr for one accumulator per row.
ReferenceResult run_reference(const WorkloadSpec& spec, int64_t iterations, const ShardingPlan* plan = nullptr,
                              const std::function<std::optional<Batch>(int64_t, int)>& batch_source = {});

}  // namespace embedscope::engine
