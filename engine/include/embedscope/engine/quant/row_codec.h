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
//   int4  FBGEMM's fused N-bit row-wise layout at bit_rate 4 (pytorch/FBGEMM src/QuantUtils.cc,
//         FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfRef, behind
//         FloatToFusedNBitRowwiseQuantizedSBHalf): dim / 2 bytes of packed 4-bit codes, column c
//         in byte c / 2, the low nibble first (even c in bits 0-3, odd c in bits 4-7), then the
//         row's fp16 scale and fp16 bias (dim / 2 + 4 bytes; dim must be even):
//           bias = fp16(min) (round to nearest even), lo = float(bias),
//           scale = fp16((max - lo) / 15) (1 when max == lo; 1 when it rounds to 0),
//           q[c] = clamp(lrintf((x[c] - lo) / scale), 0, 15),
//         read by FusedNBitRowwiseQuantizedSBHalfToFloatOrHalfRef: x[c] = scale q[c] + bias.
//         Example (tested): {0, 1, 2, 3} -> bias 0, scale fp16(0.2) = 0.199951171875, codes
//         {0, 5, 10, 15}, bytes 0x50 0xfa 0x66 0x32 0x00 0x00.
//
// Training on encoded rows (the scheme, and why): every update decodes the row to fp32, applies
// the fp32 optimizer formula and encodes the result again. No fp32 master copy is kept: for
// int8 / int4 a master copy would cost 4 dim bytes a row on top of the codes, more than the fp32
// table alone (and an fp16 master, 2 dim + dim / 2 + 4, more than the fp16 table alone), so the
// device saving the option exists for would be gone; for fp16 / bf16 that is FBGEMM's TBE with
// fp16 weights. How the updated row is rounded (TableSpec::stochastic_rounding):
//   - round to nearest (the default for fp16 / bf16 / int8): an update smaller than half a unit
//     of the stored precision is lost (bf16: 2^-9 of the value; int8: (max - min) / 510 of the
//     row; int4: (max - min) / 30, so at 16 levels almost every update of a trained row is lost),
//     and int8 / int4 re-round a whole row when its min or max moves;
//   - stochastic rounding (the default for int4; FBGEMM's TBE `stochastic_rounding` option,
//     fbgemm_gpu/include/fbgemm_gpu/utils/stochastic_rounding.cuh): a value between two stored
//     neighbours lo < x < hi is stored as hi with probability (x - lo) / (hi - lo), else lo, so
//     the stored value is x in expectation and small updates survive on average. The random
//     numbers are counter based, not a generator's stream: u = stochastic_rounding_uniform of
//     (spec seed, table, global row, global column, iteration), so a run is deterministic, every
//     replica of a data_parallel row draws the same u, the sharding does not change them, and the
//     unsharded reference (reference/) draws the same u and reproduces the run exactly.
//   Stochastic rounding, per precision (u in [0, 1), 24 bits):
//     fp16 / bf16: lo = x rounded toward zero to the precision, hi = the next value away from
//       zero, f = (|x| - |lo|) / (|hi| - |lo|) (exact in fp32); stored hi if u < f, else lo.
//       (FBGEMM adds random bits below the kept mantissa and truncates: the same distribution,
//       except that its version is biased for fp16 subnormals and this one is not.) A value beyond
//       the largest finite one (fp16: 65504) is stored as it or as inf, each with probability
//       1/2 (not modelled by the reference: embedding rows never get there).
//     int8 / int4: scale and bias as above from the row's min and max; t = (x - bias) / scale
//       (int8: (x - min) * 255 / (max - min + 1e-8)); q = floor(t) + (u < t - floor(t)), clamped
//       to [0, 255] / [0, 15] (FBGEMM's stochastic_rounding_scalar_uint8: lrintf(t + u - 0.5)).
//   The initial rows are always rounded to nearest.

#include <cstdint>

#include "embedscope/engine/quant/quant.h"
#include "embedscope/engine/workload/enums.h"

namespace embedscope::engine {

/// Bytes of one stored row of `dim` values: fp32 4 dim, fp16 / bf16 2 dim, int8 dim + 8, int4
/// dim / 2 + 4. Throws std::invalid_argument for dim < 0, and for an odd dim with int4.
int64_t row_bytes(TableDataType t, int64_t dim);

/// Encodes the fp32 row x[0, dim) into row_bytes(t, dim) bytes at `dst` (layouts above). The
/// error of the encoded row against x (max |x - decode(encode(x))|, max |x|) is merged into
/// *err when err is not null. fp32 copies the bytes (error 0). Cost O(dim).
void encode_row(TableDataType t, const float* x, int64_t dim, uint8_t* dst, QuantError* err = nullptr);

/// Decodes one stored row at `src` into out[0, dim) (fp32). Cost O(dim).
void decode_row(TableDataType t, const uint8_t* src, int64_t dim, float* out);

/// Unit roundoff of the stored precision relative to a row's magnitude, for tolerances and
/// docs: fp32 2^-24, fp16 2^-11, bf16 2^-8, int8 1/255 and int4 1/15 of the row's range
/// (returned as 1/255 and 1/15).
double row_unit_roundoff(TableDataType t);

/// Where a shard's rows sit in their table, for the counter-based random numbers of stochastic
/// rounding (the key of a value is its table and global row and column, never a local index).
struct StochasticRoundingKey {
  uint64_t seed = 0;       ///< WorkloadSpec::seed
  int table = 0;           ///< index into WorkloadSpec::tables
  int64_t row_offset = 0;  ///< global (stored, i.e. hashed) row of the shard's local row 0
  int64_t col_offset = 0;  ///< global column of the shard's local column 0
};

/// The hash of one row's key: XXH64 of the 32 bytes (table, row, iteration, 0) as little-endian
/// int64 with seed `seed`. `iteration` counts from 1 (the update's, as apply_row_optimizer).
uint64_t stochastic_rounding_row_hash(uint64_t seed, int table, int64_t row, int64_t iteration);

/// The uniform random number of column `col` (global) of a row whose hash is `row_hash`: the top
/// 24 bits of splitmix64(row_hash + col) (FBGEMM's splitmix64_stateless) times 2^-24, in
/// [0, 1 - 2^-24], exactly representable in fp32.
float stochastic_rounding_uniform(uint64_t row_hash, int64_t col);

/// encode_row with stochastic rounding (layouts and rule above): local row `row` of the shard
/// described by `key`, updated at `iteration`, values x[0, dim) of local columns [0, dim). fp32
/// copies the bytes. The error against x is merged into *err as encode_row does. Cost O(dim) plus
/// one XXH64.
void encode_row_stochastic(TableDataType t, const float* x, int64_t dim, uint8_t* dst, const StochasticRoundingKey& key,
                           int64_t row, int64_t iteration, QuantError* err = nullptr);

}  // namespace embedscope::engine
