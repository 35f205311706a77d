#pragma once
// CPU embedding kernels: pooled lookup (forward), sparse gradient accumulation and the fused
// row optimizers (backward). These are the CPU reference that every other backend is tested
// against. Layout: a table shard is `num_rows x dim` fp32, row-major, contiguous.
// A batch of bags is given CSR-style as in a KJT: ids[offsets[b] .. offsets[b+1]) belong to
// bag b; offsets has num_bags + 1 entries (offsets[0] may be > 0 when the bags are a slice of
// a larger KJT; ids are indexed absolutely).

#include <cstdint>
#include <span>
#include <vector>

#include "embedscope/engine/quant/quant.h"
#include "embedscope/engine/quant/row_codec.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// Forward pooled lookup (nn.EmbeddingBag / FBGEMM TBE forward) for one shard.
///   out[b * out_stride + c] = bag_scale[b] * sum_{i in bag b} weights[ids[i] * dim + c]
/// for c in [0, dim). bag_scale == nullptr means 1 (sum pooling); callers pass 1/len for
/// mean pooling (len = the bag's full length, also for row-wise partial bags). An empty bag
/// writes zeros. ids must be in [0, num_rows) (checked by the input pipeline, not here).
/// Cost: reads sum(len) * dim * 4 bytes of rows.
void pooled_lookup(const float* weights, int64_t num_rows, int64_t dim,
                   const int64_t* ids, const int64_t* offsets, int64_t num_bags,
                   const float* bag_scale, float* out, int64_t out_stride);

/// Gradient of one shard for a batch, reduced to one row per distinct id (sorted ascending,
/// as FBGEMM's sort + segment-reduce backward; deterministic for duplicate ids).
struct SparseGrad {
  int64_t dim = 0;
  std::vector<int64_t> rows;   ///< distinct local row ids, ascending
  std::vector<float> values;   ///< rows.size() x dim
};

/// grad[row] = sum over occurrences (b, i) of row: bag_scale[b] * grad_out[b * grad_stride + :dim]
/// bag_scale == nullptr means 1.
SparseGrad accumulate_sparse_grad(int64_t dim, const int64_t* ids, const int64_t* offsets,
                                  int64_t num_bags, const float* bag_scale,
                                  const float* grad_out, int64_t grad_stride);

/// Sums several sparse gradients of the same shard (e.g. all-gathered from data-parallel
/// replicas), in argument order per row, into one with sorted distinct rows.
SparseGrad merge_sparse_grads(std::span<const SparseGrad> parts, int64_t dim);

/// Optimizer state of one shard (FBGEMM layouts), a view of memory held elsewhere:
///  sgd: none; rowwise_adagrad: momentum1[num_rows] (mean of squared grads per row);
///  adam: momentum1 and momentum2 [num_rows x dim].
/// type fp32: the values in momentum1 / momentum2 (packed1 / packed2 empty). type fp16 / bf16
/// (TableSpec::optimizer_state_type): the same arrays as 2-byte codes (IEEE binary16 /
/// bfloat16, the layouts of quant/row_codec.h) in packed1 / packed2, 2 bytes a value
/// (momentum1 / momentum2 empty).
struct RowOptimizerState {
  std::span<float> momentum1;
  std::span<float> momentum2;
  OptimizerStateType type = OptimizerStateType::fp32;
  std::span<uint8_t> packed1;
  std::span<uint8_t> packed2;
};

/// Host-owned optimizer state (tests, benchmarks); converts to the view.
struct OptimizerStateBuffers {
  std::vector<float> momentum1;
  std::vector<float> momentum2;
  OptimizerStateType type = OptimizerStateType::fp32;
  std::vector<uint8_t> packed1;
  std::vector<uint8_t> packed2;
  operator RowOptimizerState() { return {momentum1, momentum2, type, packed1, packed2}; }
};

/// Floats of each optimizer state array for a shard of rows x dim: {momentum1, momentum2}.
std::pair<int64_t, int64_t> optimizer_state_floats(OptimizerType type, int64_t rows, int64_t dim);
/// Bytes of a value of optimizer state stored as `st`: 4 (fp32), 2 (fp16, bf16).
int64_t optimizer_state_value_bytes(OptimizerStateType st);
/// Bytes of optimizer state for a shard of rows x dim stored as `st`: the values of
/// optimizer_state_floats x optimizer_state_value_bytes(st). Example: adam, 10 x 4, fp16:
/// 2 x 40 x 2 = 160; rowwise_adagrad 10 x 4, fp32: 40.
int64_t optimizer_state_bytes(OptimizerType type, int64_t rows, int64_t dim,
                              OptimizerStateType st = OptimizerStateType::fp32);
/// Allocates zeroed host state for rows x dim, stored as `st`.
OptimizerStateBuffers make_optimizer_state(OptimizerType type, int64_t rows, int64_t dim,
                                           OptimizerStateType st = OptimizerStateType::fp32);

/// Applies the row-sparse optimizer update to the rows in `grad` only (rows not in the batch
/// are untouched, as in FBGEMM's fused backward). `iteration` counts from 1 (adam bias
/// correction). Formulas (FBGEMM split_embedding_codegen optimizers):
///   sgd:             w -= lr * g
///   rowwise_adagrad: m1[r] += mean_c(g^2); w -= lr * g / (sqrt(m1[r]) + eps)
///   adam:            m1 = b1 m1 + (1-b1) g; m2 = b2 m2 + (1-b2) g^2;
///                    w -= lr * (m1 / (1-b1^t)) / (sqrt(m2 / (1-b2^t)) + eps)
/// `weights` and `state` describe the whole shard (num_rows x dim). A state of type fp16 / bf16
/// is decoded to fp32 for each row of `grad`, updated by the same formulas (the weight step
/// uses the updated fp32 value, as FBGEMM's kernels do with fp16 momentum) and stored again,
/// rounded to nearest even (no stochastic rounding).
void apply_row_optimizer(const OptimizerSpec& opt, int64_t iteration, float* weights,
                         int64_t dim, RowOptimizerState state, const SparseGrad& grad);

/// pooled_lookup over a shard stored as `type` (TableSpec::data_type; each row
/// row_bytes(type, dim) bytes, layouts in quant/row_codec.h): each looked-up row is decoded to
/// fp32 and the bag summed in fp32 in id order (the order of pooled_lookup, so an fp32 shard
/// gives pooled_lookup's result bit for bit; fp32 calls it). Cost: reads
/// sum(len) * row_bytes(type, dim) bytes of rows.
void pooled_lookup_encoded(TableDataType type, const uint8_t* rows, int64_t num_rows, int64_t dim,
                           const int64_t* ids, const int64_t* offsets, int64_t num_bags,
                           const float* bag_scale, float* out, int64_t out_stride);

/// apply_row_optimizer on a shard stored as `type`: each row of `grad` is decoded to fp32,
/// updated by the same formulas (the optimizer state as apply_row_optimizer keeps it) and
/// encoded again (quant/row_codec.h says why no master copy is kept): rounded to nearest when
/// `sr` is null, else with stochastic rounding (encode_row_stochastic: the random numbers keyed
/// by sr's seed and table, the shard's global row sr->row_offset + r and column
/// sr->col_offset + c, and `iteration`). The encoding error of every updated row against its
/// fp32 value is merged into *err when err is not null (the "lookup error against an fp32 copy
/// of the same rows" that the run reports). fp32 calls apply_row_optimizer (error not measured:
/// it is 0; `sr` ignored).
void apply_row_optimizer_encoded(const OptimizerSpec& opt, int64_t iteration, TableDataType type, uint8_t* rows,
                                 int64_t dim, RowOptimizerState state, const SparseGrad& grad,
                                 QuantError* err = nullptr, const StochasticRoundingKey* sr = nullptr);

}  // namespace embedscope::engine
