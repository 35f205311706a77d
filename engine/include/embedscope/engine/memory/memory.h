#pragma once
// DeviceArena: the memory of one device (rank), managed by a DeviceAllocator (caching,
// expandable or direct; engine/allocator.h). Every buffer the engine keeps for a rank is a
// DeviceBuffer allocated here under a tag (weights, optimizer_state, kjt, pooled_output,
// gradients, comm_buffer, activations, dense), so a CPU device runs out of memory - and
// fragments - exactly where a GPU of `memory_bytes` with that allocator would.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "embedscope/engine/memory/allocator.h"

namespace embedscope::engine {

/// An allocation that the device cannot hold. CLI exit code 1; the run ends "oom".
/// what(): "rank 2: out of memory allocating 1.2 GiB for weights (caching allocator):
/// fragmentation: ... Advice: ..." (the allocator's explanation, prefixed with the rank).
class OomError : public std::runtime_error {
 public:
  OomError(const std::string& msg, int rank, bool fragmentation, int64_t requested)
      : std::runtime_error(msg), rank(rank), fragmentation(fragmentation), requested(requested) {}
  int rank;
  bool fragmentation;
  int64_t requested;
};

class DeviceArena {
 public:
  DeviceArena(int rank, const AllocatorConfig& config)
      : rank_(rank), allocator_(DeviceAllocator::create(config)) {}
  /// An arena over a given allocator. `device_memory`: its blocks are GPU memory, which the
  /// host cannot touch (DeviceBuffer then keeps a host copy; compact() is refused).
  DeviceArena(int rank, std::unique_ptr<DeviceAllocator> allocator, bool device_memory)
      : rank_(rank), allocator_(std::move(allocator)), device_memory_(device_memory) {}
  bool device_memory() const { return device_memory_; }
  /// The run's warm-up step count: describe_action names a negative step as the run's output
  /// does ("warm-up step 1 of 2" for step -2), not "step -2". 0 (default): "warm-up step (step -2)".
  void set_warmup_steps(int64_t n) { warmup_steps_ = n; }
  /// Allocates `bytes` (> 0) under `tag`; throws OomError (nothing else changes). The error's
  /// advice comes from replays of this arena's allocator actions so far and the failed request
  /// (oom_advice_from_replays), not the allocator's untested candidates.
  Allocation allocate(const std::string& tag, int64_t bytes);
  /// Marks the end of a training step in the action log (where a replay with memory.compaction 1
  /// packs the device).
  void mark_step_end();
  /// The advice for an OOM of `failed` (the request `bytes` this arena's allocator refused): the
  /// log of its allocate / release / compact actions and the request replayed (replay.h
  /// replay_actions, bookkeeping only, same capacity) through caching, expandable and direct,
  /// caching with max_split_size 20 MiB for a large-pool request, and the arena's own setting
  /// with compaction at every step end when steps were marked; the settings that complete them
  /// are named (advice_from_replays), or that none did; a setting that ran out is said with the
  /// action it failed at as a user can find it in the run: "OOM at step 3, embedding_backward,
  /// asking 12.0 MiB (action 61 of rank 0's log)" (describe_action). "" when the log was cut (more than
  /// kOomLogLimit actions), the allocator is cuda_async, or the replay of the arena's own
  /// setting does not run out of memory where the arena did (then the allocator's advice stands).
  /// Time: the replays are linear in the log (measured: bench/, ~tens of ms for 100k actions).
  std::string oom_advice_from_replays(const DeviceOutOfMemory& failed, int64_t bytes) const;
  /// Actions logged at most (24 B each); beyond it the log stops and OOM advice is the allocator's.
  static constexpr size_t kOomLogLimit = size_t{1} << 20;
  /// Action `entry` of this arena's log (allocate / release / compact, step ends not counted; the
  /// index after the last: `pending`, the request that failed) as a user can place it: the step
  /// and op of the innermost profiler span open on the thread that made it (ScopedSpan::innermost:
  /// warm-up steps by set_warmup_steps: "warm-up step 1 of 2"), and for an allocation the bytes asked: "step 3,
  /// embedding_backward, asking 12.0 MiB (action 61 of rank 0's log)"; "asking 4.0 KiB outside
  /// any op (action 2 of rank 0's log)" where no span was open. `pending_bytes` > 0: the failed
  /// request's bytes (made now, where the OOM is being explained).
  std::string describe_action(int64_t entry, int64_t pending_bytes = 0) const;
  void release(const Allocation& a);
  /// Called when an allocation fails, before OomError is thrown (so the layout that could not
  /// hold the request can be recorded while every buffer is still alive).
  void set_oom_handler(std::function<void()> h) { on_oom_ = std::move(h); }
  /// Wall time spent inside allocate and release so far (ns).
  int64_t allocator_ns() const { return allocator_ns_; }
  int64_t in_use() const { return allocator_->allocated_bytes(); }
  int64_t peak() const { return allocator_->stats().peak_allocated; }
  DeviceAllocator& allocator() { return *allocator_; }
  const DeviceAllocator& allocator() const { return *allocator_; }
  int rank() const { return rank_; }

  struct Compaction {
    int64_t bytes_moved = 0;
    int64_t blocks_moved = 0;
    int64_t reserved_before = 0, reserved_after = 0;
    int64_t largest_free_before = 0, largest_free_after = 0;
  };
  /// Packs the device ("periodic defragmentation"): every live DeviceBuffer is copied out, all
  /// segments are released, and the buffers are allocated again largest first and copied back
  /// (their owners see the new addresses). Call between steps, when no raw pointer into a
  /// buffer is held. Throws OomError if the packed layout does not fit (it always does for the
  /// caching and direct allocators, whose segments are never larger than before).
  Compaction compact();

  /// DeviceBuffer bookkeeping: the blocks that compact() may move.
  void track(Allocation* owner, const std::string& tag) { tracked_[owner] = tag; }
  void untrack(Allocation* owner) { tracked_.erase(owner); }

 private:
  int rank_;
  std::unique_ptr<DeviceAllocator> allocator_;
  int64_t allocator_ns_ = 0;
  std::unordered_map<Allocation*, std::string> tracked_;
  std::function<void()> on_oom_;
  bool device_memory_ = false;
  int64_t warmup_steps_ = 0;  // set_warmup_steps
  // allocate / release / compact / step ends, for the OOM's replays (kind: MemoryAction::Kind,
  // 255 = step end); id = the block's address
  static constexpr int32_t kNoStep = INT32_MIN;
  struct Logged {
    int64_t id = 0, size = 0;
    int32_t step = kNoStep;  // the innermost span's step when logged (kNoStep: no span open)
    uint16_t op = 0;         // its op name: op_names_[op] (0: none)
    uint8_t kind = 0;
  };
  mutable std::vector<std::string> op_names_{""};               // interned op names of the logged actions
  mutable std::unordered_map<std::string, uint16_t> op_index_;  // op name -> its index in op_names_
  Logged site_now(uint8_t kind, int64_t id, int64_t size) const;  // an entry made at the calling thread's span
  std::string describe(const Logged& l, int64_t entry) const;
  std::vector<Logged> log_;
  std::unordered_map<int64_t, int64_t> log_ids_;  // live block address -> its logged id (stable over compaction)
  int64_t next_log_id_ = 0;
  bool log_cut_ = false;
  void log(uint8_t kind, int64_t id, int64_t size);
};

/// An array of trivially copyable T in device memory (a block of a DeviceArena), or in host
/// memory when it has no arena. Growing it allocates a new block (and frees the old one)
/// before anything is copied; OomError leaves it unchanged. On an arena of GPU memory
/// (DeviceArena::device_memory) the block is GPU memory (device_data()) and data() is a host
/// copy of the same size; the owner moves bytes between them (cuda executor), and may release
/// that copy while the host does not need it (release_host_copy).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceArena* arena, std::string tag) : arena_(arena), tag_(std::move(tag)) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release_all();
      arena_ = o.arena_;
      tag_ = std::move(o.tag_);
      block_ = o.block_;
      host_ = std::move(o.host_);
      n_ = o.n_;
      if (arena_ && block_.ptr && !arena_->device_memory()) {
        arena_->untrack(&o.block_);
        arena_->track(&block_, tag_);
      }
      o.block_ = {};
      o.n_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release_all(); }

  /// Resizes to n elements, all equal to `value`.
  void assign(size_t n, const T& value = T()) {
    const auto bytes = static_cast<int64_t>(n * sizeof(T));
    if (arena_ == nullptr) {
      host_.assign(n, value);
    } else if (arena_->device_memory()) {
      if (bytes > block_.size || block_.ptr == nullptr) {
        Allocation fresh = bytes > 0 ? arena_->allocate(tag_, bytes) : Allocation{};
        if (block_.ptr) {
          arena_->untrack(&block_);
          arena_->release(block_);
        }
        block_ = fresh;
      }
      host_.assign(n, value);
    } else if (bytes > block_.size || block_.ptr == nullptr) {
      Allocation fresh = bytes > 0 ? arena_->allocate(tag_, bytes) : Allocation{};
      if (block_.ptr) arena_->release(block_);
      block_ = fresh;
      if (block_.ptr) arena_->track(&block_, tag_);
    }
    n_ = n;
    std::fill_n(data(), n, value);
  }
  T* data() { return arena_ && !arena_->device_memory() ? static_cast<T*>(block_.ptr) : host_.data(); }
  const T* data() const { return arena_ && !arena_->device_memory() ? static_cast<const T*>(block_.ptr) : host_.data(); }
  /// On a device_memory arena: frees the host copy (data() is nullptr until restore_host_copy;
  /// size() and the device block are kept). For buffers the host never reads during the run
  /// (the cuda backend's shard weights and optimizer state after their upload), so that a GPU
  /// plan does not need the same bytes again in host memory. Elsewhere: nothing.
  void release_host_copy() {
    if (arena_ && arena_->device_memory()) std::vector<T>().swap(host_);
  }
  /// Gives a released host copy back (size() elements, zeroed) to read the device block into.
  void restore_host_copy() {
    if (arena_ && arena_->device_memory() && host_.size() != n_) host_.assign(n_, T());
  }
  /// The block (GPU memory on a device_memory arena); nullptr when empty or without an arena.
  T* device_data() { return static_cast<T*>(block_.ptr); }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }

 private:
  void release_all() {
    if (arena_ && block_.ptr) {
      arena_->untrack(&block_);
      arena_->release(block_);
    }
    block_ = {};
    host_.clear();
    n_ = 0;
  }
  DeviceArena* arena_ = nullptr;
  std::string tag_;
  Allocation block_;
  std::vector<T> host_;
  size_t n_ = 0;
};

}  // namespace embedscope::engine
