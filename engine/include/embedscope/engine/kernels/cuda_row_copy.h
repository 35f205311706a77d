#pragma once
// copy_rows (kernels/row_copy.h) on the GPU, for the tables in host memory (model/host_cache.h):
// one launch moves a batch's rows between the device (cache slots, staging buffers) and the
// host rows, read and written in place through their mapped pinned pointer (cudaHostRegister
// with cudaHostRegisterMapped; FBGEMM's UVM path). Built with EMBEDSCOPE_WITH_CUDA (link
// embedscope::engine_cuda). Not yet run on a GPU (issue 16 / 14).

#include <cstdint>

namespace embedscope::engine::cuda {

/// copy_rows on `stream` (a cudaStream_t as void*): src, src_alt, dst, dst_alt are device
/// pointers or device pointers of mapped pinned host memory; src_rows / dst_rows (n indices
/// each, or nullptr for i) are device memory. One warp a row, its lanes over the columns
/// (coalesced 128 B reads of a row through PCIe for host rows). A bit copy: equal to the CPU
/// reference bit for bit. Asynchronous (the caller syncs before the host reads host rows it
/// wrote); n == 0 or dim == 0 launches nothing. A negative index with a null `_alt` base is not
/// checked on the device (the caller's contract). Throws std::invalid_argument for n or dim < 0,
/// LaunchError for a failed launch.
void copy_rows_cuda(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows, float* dst,
                    float* dst_alt, const int64_t* dst_rows, void* stream = nullptr);

}  // namespace embedscope::engine::cuda
