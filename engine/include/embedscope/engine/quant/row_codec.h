#pragma once
// Embedding rows stored in reduced precision (TableSpec::data_type): the bytes of a row and its
// encoding to and from fp32. Used by the CPU kernels on encoded shards (kernels/kernels.h:
// pooled_lookup_encoded, apply_row_optimizer_encoded), the threaded executor's local shards, the
// planner's memory estimate and the unsharded reference (which models the same rounding).
//
// Layouts of one row of `dim` values:
//   fp32  dim x 4 bytes (the plain layout of every other kernel);
//   fp16  dim x 2 bytes, IEEE binary16, round to nearest even (Eigen::half);
//   bf16  dim x 2 bytes, bfloat16, round to nearest even (Eigen::bfloat16);
//   int8  FBGEMM's fused 8-bit row-wise layout: dim uint8 codes, then the row's fp32 scale and
//         fp32 bias (dim + 8 bytes), as fbgemm/src/QuantUtils.cc
//         FloatToFused8BitRowwiseQuantizedSBFloatRef writes it:
//           scale = (max - min) / 255, bias = min,
//           q[c] = lrintf((x[c] - min) * 255 / (max - min + 1e-8)),
//         and Fused8BitRowwiseQuantizedSBFloatToFloatOrHalfRef reads it: x[c] = q[c] * scale + bias.
//
// Training on encoded rows (the scheme, and why): every update decodes the row to fp32, applies
// the fp32 optimizer formula and encodes the result again (round to nearest; no stochastic
// rounding). No fp32 master copy is kept: for fp16 / bf16 that is FBGEMM's TBE with fp16
// weights (its stochastic rounding option left out so that runs are deterministic and checked
// against the reference exactly); for int8, a master copy would cost 4 dim + dim + 8 bytes a
// row, more than the fp32 table alone, so the device saving the option exists for would be
// gone (FBGEMM's int8 TBE is for inference only). The price, which the loss measures: an
// update smaller than half a unit of the stored precision is lost (bf16: 2^-9 of the value;
// int8: (max - min) / 510 of the row), and int8 re-rounds a whole row when its min or max moves.

#include <cstdint>

#include "embedscope/engine/quant/quant.h"
#include "embedscope/engine/workload/enums.h"

namespace embedscope::engine {

/// Bytes of one stored row of `dim` values: fp32 4 dim, fp16 / bf16 2 dim, int8 dim + 8.
/// Throws std::invalid_argument for dim < 0.
int64_t row_bytes(TableDataType t, int64_t dim);

/// Encodes the fp32 row x[0, dim) into row_bytes(t, dim) bytes at `dst` (layouts above). The
/// error of the encoded row against x (max |x - decode(encode(x))|, max |x|) is merged into
/// *err when err is not null. fp32 copies the bytes (error 0). Cost O(dim).
void encode_row(TableDataType t, const float* x, int64_t dim, uint8_t* dst, QuantError* err = nullptr);

/// Decodes one stored row at `src` into out[0, dim) (fp32). Cost O(dim).
void decode_row(TableDataType t, const uint8_t* src, int64_t dim, float* out);

/// Unit roundoff of the stored precision relative to a row's magnitude, for tolerances and
/// docs: fp32 2^-24, fp16 2^-11, bf16 2^-8, int8 1/255 of the row's range (returned as 1/255).
double row_unit_roundoff(TableDataType t);

}  // namespace embedscope::engine
