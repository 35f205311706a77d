#pragma once
// The reduction of the intra-device communicator (comm/local/local_comm.h) on a GPU: dst += src
// elementwise in fp32 (reduce-scatter and all-reduce between ranks on one GPU). In
// embedscope_engine_cuda (kernels/cuda/reduce.cu), compiled in every CUDA build; a header of its
// own so that cuda_kernels.h's many includers are not rebuilt for it.

#include <cstdint>

namespace embedscope::engine::cuda {

/// dst[i] += src[i] for 0 <= i < n (device pointers, fp32, round to nearest), one thread per
/// element, on `stream` (a cudaStream_t as void*; nullptr: the legacy default stream).
/// Asynchronous. Nothing for n <= 0; throws LaunchError (cuda_kernels.h) when the launch fails.
void add_f32_cuda(float* dst, const float* src, int64_t n, void* stream);

}  // namespace embedscope::engine::cuda
