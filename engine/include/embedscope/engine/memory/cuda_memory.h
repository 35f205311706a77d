#pragma once
// Device memory of the cuda backend for the engine's allocators (allocator.h), built with
// EMBEDSCOPE_WITH_CUDA only. No CUDA header is needed to include this one.
//  - cuda_malloc_source: segments from cudaMalloc / cudaFree (caching, direct allocators).
//  - cuda_vmm_source: the expandable allocator's ranges through CUDA virtual memory management
//    (cuMemAddressReserve, then cuMemCreate + cuMemMap + cuMemSetAccess one page of
//    cuMemGetAllocationGranularity bytes at a time, cuMemUnmap + cuMemRelease when
//    pages are given back, at the end of the range or as a hole in it), as
//    PyTorch's expandable_segments. The driver API is reached through
//    cudaGetDriverEntryPointByVersion, so nothing links libcuda.
//  - create_cuda_async_allocator: `cuda_async`, cudaMallocFromPoolAsync from a pool of its
//    own per device (cudaMemPoolCreate; release threshold = the capacity, so freed memory
//    stays cached up to it).
// Every function acts on the calling thread's current device (cudaSetDevice first).

#include <cstdint>
#include <memory>

#include "embedscope/engine/memory/allocator.h"

namespace embedscope::engine {

/// Segments from cudaMalloc (nullptr on cudaErrorMemoryAllocation) / cudaFree.
std::shared_ptr<SegmentSource> cuda_malloc_source();
/// Ranges through CUDA VMM on `device` (see the file comment). Throws std::runtime_error naming
/// the call when the driver lacks an entry point or cuMemGetAllocationGranularity fails.
std::shared_ptr<SegmentSource> cuda_vmm_source(int device);
/// Bytes cudaMemGetInfo reports free on the current device.
int64_t cuda_free_memory();

/// The cuda_async allocator on `device`, allocating and freeing in the order of `stream` (a
/// cudaStream_t). Figures: allocated = cudaMemPoolAttrUsedMemCurrent, reserved =
/// cudaMemPoolAttrReservedMemCurrent, peaks = the *High attributes. The pool hides its layout,
/// so snapshot() is one opaque segment of the reserved bytes holding the live allocations
/// packed in address order (their offsets in it are not the pool's) and one free block of the
/// rest. A request beyond the capacity, or one the pool cannot place even after trimming it
/// (cudaMemPoolTrimTo 0) and retrying, throws DeviceOutOfMemory: capacity when free bytes
/// (capacity - allocated) < request, else pool fragmentation.
std::unique_ptr<DeviceAllocator> create_cuda_async_allocator(const AllocatorConfig& config, int device, void* stream);

}  // namespace embedscope::engine
