#pragma once
// The fused row optimizer of reduced-precision shards on the device (built with
// EMBEDSCOPE_WITH_CUDA; link embedscope::engine_cuda; conventions of cuda_kernels.h: raw device
// pointers, `stream` a cudaStream_t as void*, launches through the checked launcher).

#include <cstdint>

#include "embedscope/engine/quant/row_codec.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::cuda {

/// apply_row_optimizer_encoded (kernels.h) on the device: the fused row optimizer of a shard whose
/// rows are stored as `type` (row_bytes(type, dim) bytes a row, quant/row_codec.h layouts) and
/// whose optimizer state is stored as `state_type` (fp32 floats, or fp16 / bf16 2-byte codes;
/// state1 / state2 the shard's momentum1 / momentum2, nullptr where the optimizer has none).
/// The gradient is already reduced: n distinct local rows row_ids[u] (device, int64) with
/// values[u * dim .. + dim) (device floats). Each row is decoded to fp32, updated by
/// apply_row_optimizer's formulas (state decoded to fp32, the step taken with the updated fp32
/// value, the state stored rounded to nearest even) and encoded again: rounded to nearest when
/// `sr` is null (or type is fp32), else stochastically with encode_row_stochastic's counter-based
/// random numbers (keyed by sr's seed and table, global row sr->row_offset + r, global column
/// sr->col_offset + c, `iteration`). Every operation is the CPU code's in its order
/// (kernels/cuda/encoded_update_math.h), so the stored bytes are bit-equal to
/// apply_row_optimizer_encoded's. `scratch`: n x dim floats of device memory (each row's fp32
/// values); `row_errors` (nullable): n x 2 floats, per row {max |w - decoded(encoded(w))|, max |w|}
/// (the QuantError that apply_row_optimizer_encoded merges; for type fp32 the error is 0 and the
/// CPU does not measure it). One thread per row on `stream`; asynchronous. Rows outside
/// [0, num_rows) are skipped. Throws std::invalid_argument for dim <= 0, negative counts, an odd
/// dim with int4, a missing state array, adam with iteration < 1; LaunchError for a failed launch.
void apply_row_optimizer_encoded_cuda(const OptimizerSpec& opt, int64_t iteration, TableDataType type, void* rows,
                                      int64_t num_rows, int64_t dim, OptimizerStateType state_type, void* state1,
                                      void* state2, const int64_t* row_ids, int64_t n, const float* values,
                                      const StochasticRoundingKey* sr, float* scratch, float* row_errors,
                                      void* stream = nullptr);

}  // namespace embedscope::engine::cuda
