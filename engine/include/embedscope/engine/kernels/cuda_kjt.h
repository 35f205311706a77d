#pragma once
// kjt_permute of the KJT input dist on a GPU (kjt_permute_core.h; issue 14). In
// embedscope_engine_cuda (kernels/cuda/kjt_permute.cu), compiled in every CUDA build; a header of
// its own so that cuda_kernels.h's many includers are not rebuilt for it.

#include <cstdint>

#include "embedscope/engine/kernels/workspace.h"

namespace embedscope::engine::cuda {

/// kjt_permute_core::permute on device pointers: lengths_in (W * P * B, received (source, slot,
/// bag) order) and ids_in (num_ids) regrouped into ids_out (num_ids, (slot, source, bag) order)
/// and offsets_out (P x (W * B + 1), each slot's from 0). Five steps on `stream` (a cudaStream_t
/// as void*): the lengths gathered into the permuted order (one thread per bag), two CUB
/// inclusive scans (where each bag starts in ids_in, and in ids_out), each slot's offsets rebased
/// to 0 (one thread per offset), and the ids copied one warp per bag. Scratch (3 x (W*P*B + 1)
/// int64 and CUB's temporary storage) from `workspace` (grow-only: no allocation once it is large
/// enough). Asynchronous: nothing waits. The lengths must add up to num_ids (the caller's
/// counts come from the same all-to-all's splits; not checked on the device: ids of bags past
/// num_ids are not written). Throws std::invalid_argument for a negative shape (check_shape)
/// and LaunchError (cuda_kernels.h) when a launch fails.
void kjt_permute_cuda(int64_t W, int64_t P, int64_t B, const int64_t* lengths_in, const int64_t* ids_in,
                      int64_t num_ids, int64_t* ids_out, int64_t* offsets_out, GrowOnlyWorkspace& workspace,
                      void* stream);

}  // namespace embedscope::engine::cuda
