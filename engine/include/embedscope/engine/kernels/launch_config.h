#pragma once
// Launch configuration of the CUDA kernels, computed and checked on the host. Pure host code
// (no CUDA types), compiled in every build so that it is tested without a GPU; the CUDA
// launcher (launch() in engine/kernels/cuda/common.cuh) calls check_launch() before every kernel launch.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace embedscope::engine {

/// A grid or block size. int64_t so that an oversized request is reported, not truncated.
struct Dim3 {
  int64_t x = 1, y = 1, z = 1;
  int64_t count() const { return x * y * z; }
};

/// The limits of one device (cudaDeviceProp names). The defaults are those of every CUDA
/// device of compute capability >= 3.0 except the shared-memory size, which callers take from
/// cudaDevAttrMaxSharedMemoryPerBlockOptin (227 KiB on sm_90, 163 KiB on sm_80).
struct LaunchLimits {
  int64_t max_grid_x = 2147483647;           ///< maxGridSize[0] = 2^31 - 1
  int64_t max_grid_yz = 65535;               ///< maxGridSize[1], maxGridSize[2]
  int64_t max_threads_per_block = 1024;      ///< maxThreadsPerBlock (also the limit of block.x, block.y)
  int64_t max_block_z = 64;                  ///< maxThreadsDim[2]
  int64_t max_shared_bytes = 48 * 1024;      ///< dynamic shared memory per block, bytes
};

/// One kernel launch: grid (blocks), block (threads) and dynamic shared memory in bytes.
struct LaunchConfig {
  Dim3 grid, block;
  int64_t shared_bytes = 0;
};

/// Thrown for an invalid launch configuration and for a failed launch. what() names the
/// kernel and its shapes, e.g. "tbe_forward (tables=3 bags=12288 ids=393216): grid.y = 70000
/// exceeds the device limit 65535".
class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Blocks needed to cover `items` work items at `items_per_block` each (ceil division);
/// 0 for items <= 0. Throws std::invalid_argument if items_per_block <= 0.
int64_t blocks_for(int64_t items, int64_t items_per_block);

/// Checks `cfg` against `limits`. Returns false when the grid is empty (a dimension is 0):
/// the caller skips the launch, as zero-size work is not launched. Returns true when the
/// launch is valid. Throws LaunchError naming `kernel` and `shapes` when a grid dimension is
/// negative or above its limit, a block dimension is < 1 or above its limit, the block has
/// more than max_threads_per_block threads, or shared_bytes is negative or above
/// max_shared_bytes.
bool check_launch(std::string_view kernel, std::string_view shapes, const LaunchConfig& cfg,
                  const LaunchLimits& limits);

/// A 1-D launch of `threads` threads per block covering `items` items with
/// `items_per_block` items per block (grid.x = blocks_for(items, items_per_block)).
LaunchConfig launch_1d(int64_t items, int64_t items_per_block, int64_t threads,
                       int64_t shared_bytes = 0);

}  // namespace embedscope::engine
