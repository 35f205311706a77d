#pragma once
// Device scratch that grows and is reused (issue 14, "asynchronous, overlapped, exact"): the
// CUB temporary storage and sort buffers of tbe_backward_update (cuda_kernels.h) and other
// per-step scratch come from one block per rank that only grows, so that after the first steps
// (warm-up) a step makes no cudaMalloc / cudaFree, which synchronize the whole device and would
// make compute wait behind in-flight NCCL kernels. Header only and free of CUDA: the memory
// comes from the functions given (cudaMalloc / cudaFree on a GPU, malloc / free in the tests),
// so the growth policy is tested without a device (tests/engine/exec/device_workspace_test.cpp).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <utility>

namespace embedscope::engine {

/// A grow-only block of scratch memory.
///
/// Policy: reserve(n) with n <= capacity() returns the block as it is (no call to the
/// allocator); otherwise the old block is freed first (its contents are scratch, not kept) and a
/// new one of round_up(max(n, 2 x capacity()), 256) bytes is allocated, so that a sequence of
/// slowly growing requests allocates O(log) times. Example: reserve(1000) -> 1024 bytes (1
/// growth), reserve(1100) -> 2048 (2), reserve(2048) -> same block, reserve(5000) -> 5120 (3).
/// Not thread safe: one per stream (the kernels that use it are ordered on that stream; a block
/// is freed only when the next reserve grows it, and `free_fn` must wait for the stream's work
/// on it - cudaFree does, by synchronizing the device).
class GrowOnlyWorkspace {
 public:
  using AllocFn = std::function<void*(size_t bytes)>;  ///< returns a block of `bytes` or throws
  using FreeFn = std::function<void(void*)>;           ///< releases a block of alloc_fn (never nullptr)

  /// Alignment (bytes) of capacities and of the pieces take() hands out.
  static constexpr size_t kAlign = 256;

  GrowOnlyWorkspace(AllocFn alloc_fn, FreeFn free_fn) : alloc_(std::move(alloc_fn)), free_(std::move(free_fn)) {
    if (!alloc_ || !free_) throw std::invalid_argument("GrowOnlyWorkspace: alloc_fn and free_fn are required");
  }
  GrowOnlyWorkspace(const GrowOnlyWorkspace&) = delete;
  GrowOnlyWorkspace& operator=(const GrowOnlyWorkspace&) = delete;
  ~GrowOnlyWorkspace() {
    if (p_) free_(p_);
  }

  /// Rounds `bytes` up to a multiple of kAlign (0 stays 0).
  static constexpr size_t round_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
  /// The capacity a workspace of `capacity` bytes grows to for a request of `bytes`
  /// (> capacity): round_up(max(bytes, 2 x capacity)).
  static constexpr size_t grown_capacity(size_t capacity, size_t bytes) {
    return round_up(bytes > 2 * capacity ? bytes : 2 * capacity);
  }

  /// A block of at least `bytes` (nullptr for 0 bytes when nothing was reserved yet). Grows as
  /// the class comment says; if the allocation throws, the workspace is left empty (capacity 0).
  void* reserve(size_t bytes) {
    if (bytes <= capacity_) return p_;
    const size_t want = grown_capacity(capacity_, bytes);
    if (p_) {
      free_(p_);
      ++frees_;
      p_ = nullptr;
      capacity_ = 0;
    }
    p_ = alloc_(want);
    ++allocs_;
    capacity_ = want;
    return p_;
  }
  size_t capacity() const { return capacity_; }  ///< bytes
  int64_t allocs() const { return allocs_; }     ///< calls to alloc_fn so far
  int64_t frees() const { return frees_; }       ///< calls to free_fn so far (not counting the destructor's)

 private:
  AllocFn alloc_;
  FreeFn free_;
  void* p_ = nullptr;
  size_t capacity_ = 0;
  int64_t allocs_ = 0, frees_ = 0;
};

/// Hands out consecutive kAlign-aligned pieces of one block (the layout of a kernel's scratch
/// inside a workspace). `need()` after the takes is the bytes a workspace must reserve; used
/// twice: once without a base to size, once with the block to place.
class ScratchLayout {
 public:
  explicit ScratchLayout(char* base = nullptr) : base_(base) {}
  /// The next piece of `bytes` (rounded up to kAlign); nullptr while sizing (no base).
  char* take(size_t bytes) {
    char* p = base_ ? base_ + used_ : nullptr;
    used_ += GrowOnlyWorkspace::round_up(bytes);
    return p;
  }
  size_t need() const { return used_; }  ///< bytes taken so far

 private:
  char* base_;
  size_t used_ = 0;
};

}  // namespace embedscope::engine
