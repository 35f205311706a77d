// Pooled lookup over rows in FBGEMM's fused row-wise 8-bit and 4-bit layouts
// (tbe_forward_quantized, cuda_kernels.h). CPU reference: pooled_lookup_encoded (kernels.h)
// with decode_row (quant/row_codec.h); the arithmetic below is theirs operation by operation
// (explicit _rn intrinsics, no FMA contraction), so the results are bit-equal.

#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "common.cuh"

namespace embedscope::engine::cuda {

using detail::kWarp;

namespace {

constexpr int kWarpsPerBlock = 4;  // one warp per bag
constexpr int kThreads = kWarpsPerBlock * kWarp;

// Little-endian loads at any byte offset (an int8 row is dim + 8 bytes: its scale need not be
// 4-byte aligned).
__device__ __forceinline__ float f32_at(const uint8_t* p) {
  const uint32_t u = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                     static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
  return __uint_as_float(u);
}
__device__ __forceinline__ float f16_at(const uint8_t* p) {
  const unsigned short u = static_cast<unsigned short>(p[0] | p[1] << 8);
  return __half2float(__ushort_as_half(u));
}

// One warp pools bag `bag` over columns lane, lane + 32, ...; the rows' scale and bias are read
// once per row and column pass (the same 4 or 8 bytes for the whole warp: one broadcast).
template <bool kInt4>
__global__ void __launch_bounds__(kThreads)
    tbe_forward_quantized_kernel(const uint8_t* __restrict__ rows, int64_t num_rows, int64_t dim, int64_t row_bytes,
                                 const int64_t* __restrict__ ids, const int64_t* __restrict__ offsets,
                                 int64_t num_bags, const float* __restrict__ bag_scale, float* __restrict__ out,
                                 int64_t out_stride) {
  const int64_t bag = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (bag >= num_bags) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t begin = offsets[bag], end = offsets[bag + 1];
  const float s = bag_scale != nullptr ? bag_scale[bag] : 1.0f;
  const int64_t codes = kInt4 ? dim / 2 : dim;  // bytes of codes before the scale and bias
  for (int64_t c = lane; c < dim; c += kWarp) {
    float acc = 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t id = ids[i];
      if (id < 0 || id >= num_rows) continue;
      const uint8_t* r = rows + id * row_bytes;
      float x;
      if constexpr (kInt4) {  // scale * q + bias, fp16 scale and bias
        const int q = (r[c / 2] >> ((c % 2) * 4)) & 0xf;
        x = __fadd_rn(__fmul_rn(f16_at(r + codes), static_cast<float>(q)), f16_at(r + codes + 2));
      } else {  // q * scale + bias, fp32 scale and bias
        x = __fadd_rn(__fmul_rn(static_cast<float>(r[c]), f32_at(r + codes)), f32_at(r + codes + 4));
      }
      acc = __fadd_rn(acc, x);
    }
    out[bag * out_stride + c] = s != 1.0f ? __fmul_rn(acc, s) : acc;
  }
}

}  // namespace

void tbe_forward_quantized(TableDataType type, const void* rows, int64_t num_rows, int64_t dim, const int64_t* ids,
                           const int64_t* offsets, int64_t num_bags, const float* bag_scale, float* out,
                           int64_t out_stride, void* stream) {
  if (type != TableDataType::int8 && type != TableDataType::int4)
    throw std::invalid_argument(std::string("tbe_forward_quantized: data_type ") + enum_name(type) +
                                " (int8 or int4; tbe_forward reads fp32, fp16 and bf16 rows)");
  if (dim <= 0 || num_rows < 0 || num_bags < 0 || out_stride < dim)
    throw std::invalid_argument("tbe_forward_quantized: dim " + std::to_string(dim) + ", num_rows " +
                                std::to_string(num_rows) + ", num_bags " + std::to_string(num_bags) + ", out_stride " +
                                std::to_string(out_stride) + " (dim > 0, counts >= 0, out_stride >= dim)");
  if (type == TableDataType::int4 && dim % 2 != 0)
    throw std::invalid_argument("tbe_forward_quantized: int4 rows need an even dim, not " + std::to_string(dim));
  const int64_t bytes = type == TableDataType::int4 ? dim / 2 + 4 : dim + 8;  // row_bytes (quant/row_codec.h)
  const std::string shapes = std::string("type=") + enum_name(type) + " rows=" + std::to_string(num_rows) +
                             " dim=" + std::to_string(dim) + " bags=" + std::to_string(num_bags);
  const auto cfg = launch_1d(num_bags, kWarpsPerBlock, kThreads);
  const auto* r = static_cast<const uint8_t*>(rows);
  auto s = static_cast<cudaStream_t>(stream);
  if (type == TableDataType::int4)
    detail::launch("tbe_forward_quantized", shapes, cfg, s, tbe_forward_quantized_kernel<true>, r, num_rows, dim,
                   bytes, ids, offsets, num_bags, bag_scale, out, out_stride);
  else
    detail::launch("tbe_forward_quantized", shapes, cfg, s, tbe_forward_quantized_kernel<false>, r, num_rows, dim,
                   bytes, ids, offsets, num_bags, bag_scale, out, out_stride);
}

}  // namespace embedscope::engine::cuda
