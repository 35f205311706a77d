#pragma once
// The bags of several parts made one on a GPU (bag_concat_core.h): the ids and offsets the
// sparse-gradient accumulation reads for a shard that several local slots read, built from the
// slots' permuted ids and offsets where the device input dist left them. In
// embedscope_engine_cuda (kernels/cuda/bag_concat.cu), compiled in every CUDA build; a header of
// its own so that cuda_kernels.h's many includers are not rebuilt for it.

#include <cstdint>
#include <span>

#include "embedscope/engine/kernels/bag_concat_core.h"

namespace embedscope::engine::cuda {

/// The parts one launch takes (their pointers and bases travel as the kernel's arguments, so
/// nothing is copied to the device); more parts take one launch per kMaxParts.
inline constexpr int kBagConcatMaxParts = 16;

/// bag_concat_core::concat on device pointers (parts[p].ids / .offsets and the outputs are
/// device memory; the parts' num_ids come from the host): ids_out (the parts' ids together) and
/// offsets_out (parts x bags_per_part + 1). One thread per output element: an id copied from the
/// part part_of_id names, an offset from offset_at; ceil(parts / kBagConcatMaxParts) launches on
/// `stream` (a cudaStream_t as void*). No scratch, no copy to or from the host, nothing waits.
/// The parts' offsets are not checked on the device (the host reference does). Throws
/// std::invalid_argument (bag_concat_core::check_shape) for a negative size and LaunchError
/// (cuda_kernels.h) when a launch fails.
void concat_bags_cuda(std::span<const bag_concat_core::Part> parts, int64_t bags_per_part, int64_t* ids_out,
                      int64_t* offsets_out, void* stream);

}  // namespace embedscope::engine::cuda
