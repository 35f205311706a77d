#pragma once
// Device allocators: where every byte of a device lives, so that fragmentation can be seen
// and an out-of-memory error explained.
//
// A device has `capacity` bytes. Allocators reserve *segments* of it (cudaMalloc on a GPU,
// host memory on a CPU device) and carve *blocks* out of them for requests:
//  - caching: PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp): sizes
//    rounded up to 512 B; requests <= 1 MiB from a small pool of 2 MiB segments, larger ones
//    from a large pool (segments of 20 MiB for requests < 10 MiB, else the request rounded up
//    to 2 MiB); best-fit over cached free blocks; blocks split when the rest is worth keeping
//    (>= 512 B small; large: > 1 MiB and the request below max_split_size, should_split) and
//    coalesced with free neighbours when freed; a request below max_split_size never takes a
//    cached block of max_split_size or more, one of max_split_size or more only a block less
//    than 20 MiB larger (get_free_block); on failure the cached free segments are released and
//    a new segment tried once more before OOM (release_cached_blocks). Segments belong to
//    the stream that reserved them and serve only that stream's requests (per-stream free
//    lists, as PyTorch's BlockPool orders blocks by stream first): a block freed on stream 0
//    is never handed to a request on stream 1. With a garbage_collection_threshold, whole free
//    segments unused longest are released before a new one is reserved once reserved bytes pass
//    that fraction of the capacity (garbage_collect_cached_blocks; AllocatorConfig).
//  - expandable: PyTorch's expandable_segments (ExpandableSegment): one address range per pool
//    and stream (1 1/8 of the capacity), mapped in pages of 2 MiB (small pool, kSmallBuffer) or
//    20 MiB (large pool, kLargeBuffer) where a request needs them: the lowest unmapped range that,
//    with the free block before it, holds the request - a hole or the end (find_expandable_block)
//    - so freed space is reused by larger requests instead of stranding. Blocks split whenever
//    512 B or more remain, in both pools (should_split). Releasing the cache unmaps every whole
//    page inside a free block, anywhere in the range (release_cached_blocks, unmap_block); the
//    holes are mapped again by later requests. Reserved bytes are the mapped pages; a snapshot
//    shows each run of mapped pages as a segment, as PyTorch's does.
//  - direct: one segment per allocation, released on free (what a cache saves you from).
//  - cuda_async (cuda backend only, cuda_memory.h): cudaMallocAsync from a per-device memory
//    pool; the pool hides its layout, so a snapshot is one opaque segment per pool.
// Where segments come from is a SegmentSource: host memory (mmap) by default; on the cuda
// backend cudaMalloc / cudaFree (caching, direct) and CUDA virtual memory management
// (cuMemAddressReserve / cuMemCreate / cuMemMap, expandable), so the same allocators, stats,
// snapshots and OOM explanations hold for GPU memory.
// Single-threaded per device (one rank owns it); not thread-safe.

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/engine/workload/enums.h"  // AllocatorKind, its to_string and allocator_kind_from_string

namespace embedscope::engine {

/// Where an allocator's segments live. map / unmap: a whole segment (caching, direct);
/// reserve_range / commit / decommit / release_range: the address range of each pool of the
/// expandable allocator (reserved up front; pages committed and decommitted anywhere in it).
/// map and commit return nullptr / false when the device's memory is not available although
/// the allocator's capacity had room for it (cudaMalloc / cuMemCreate out of memory: another
/// process or context holds it); the allocator then declares OOM naming the source's refusal,
/// not fragmentation. Other failures throw std::runtime_error naming the call; the host source
/// throws HostMemoryError for every refusal (the machine's, not the modelled device's).
class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  /// "host", "cudaMalloc", "cuMemMap" (session metadata, messages).
  virtual const char* name() const = 0;
  virtual void* map(int64_t bytes) = 0;
  virtual void unmap(void* p, int64_t bytes) = 0;
  virtual void* reserve_range(int64_t bytes) = 0;
  /// Makes [base + from, base + to) usable (from < to, both multiples of 2 MiB); pages outside
  /// it stay as they are.
  virtual bool commit(void* base, int64_t from, int64_t to) = 0;
  /// Gives [base + from, base + to) back (from < to, both multiples of 2 MiB; anywhere in the
  /// range: a hole between pages still in use, or its end).
  virtual void decommit(void* base, int64_t from, int64_t to) = 0;
  virtual void release_range(void* base, int64_t bytes) = 0;
};

/// A segment source's host-memory refusal (the host source's mmap or mprotect failed): a
/// resource of this machine or process ran out, not the modelled device's capacity, so it is
/// no DeviceOutOfMemory. what(): "host memory: mmap of 750.0 MiB (an address range, PROT_NONE)
/// failed: Cannot allocate memory; this process's address space is limited to 5.7 GiB (ulimit
/// -v) and 5.1 GiB of it is in use", prefixed by the allocator with what it reserved.
class HostMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The host source: mmap'ed anonymous memory (MAP_NORESERVE); ranges reserved PROT_NONE and
/// committed with mprotect (madvise(MADV_DONTNEED) on decommit). map, reserve_range and commit
/// throw HostMemoryError when the kernel refuses (errno's text and address_space_limit_note()).
std::shared_ptr<SegmentSource> host_segment_source();

/// "; this process's address space is limited to 5.7 GiB (ulimit -v) and 5.1 GiB of it is in
/// use" when RLIMIT_AS is set (the in-use part from /proc/self/status VmSize, left out where
/// unreadable), "" when unlimited. Reads the limit and the file each call; never throws.
std::string address_space_limit_note();
/// This process's address space in use now, bytes (/proc/self/status VmSize); 0 where unreadable.
int64_t address_space_in_use();

/// Page bookkeeping of a range committed from its start in pages of `granularity` bytes
/// (cuMemCreate needs sizes that are multiples of cuMemGetAllocationGranularity's answer; the
/// CUDA VMM source rounds its ranges with round_up, and maps pages anywhere in a range, holes
/// included). Pure logic, no device needed.
class VmmPages {
 public:
  /// Throws std::invalid_argument for granularity <= 0.
  explicit VmmPages(int64_t granularity);
  int64_t granularity() const { return granularity_; }
  /// Pages mapped now.
  int64_t pages() const { return pages_; }
  /// Bytes mapped now (pages() x granularity).
  int64_t mapped_bytes() const { return pages_ * granularity_; }
  /// The range of page indices [first, last) to map so that `bytes` from the range start are
  /// usable (bytes rounded up to the granularity); empty when already mapped. Records them.
  std::pair<int64_t, int64_t> grow_to(int64_t bytes);
  /// The page indices [first, last) no longer needed to hold `bytes` (rounded up); records it.
  std::pair<int64_t, int64_t> shrink_to(int64_t bytes);
  /// `bytes` rounded up to a multiple of the granularity.
  int64_t round_up(int64_t bytes) const { return (bytes + granularity_ - 1) / granularity_ * granularity_; }

 private:
  int64_t granularity_;
  int64_t pages_ = 0;
};

struct AllocatorConfig {
  AllocatorKind kind = AllocatorKind::caching;
  int64_t capacity_bytes = 0;
  /// PyTorch's max_split_size_mb in bytes; 0 = unlimited. A large-pool block is not split for a
  /// request of this size or more (should_split), a request below it never takes a cached block
  /// of this size or more, and one of this size or more takes a cached block only when it is
  /// less than 20 MiB larger (get_free_block). Expandable segments split whatever the size.
  int64_t max_split_size = 0;
  /// Back segments with memory; false: bookkeeping only (replays of big traces).
  bool back_with_memory = true;
  /// PyTorch's garbage_collection_threshold (PYTORCH_CUDA_ALLOC_CONF), a fraction of the
  /// capacity; 0 = off, else 0 < t < 1 (create() throws std::invalid_argument otherwise). When
  /// no cached block serves a request and reserved bytes exceed t x capacity, whole free
  /// segments of the large pool are released, those unused longest first, until reserved is
  /// below it (garbage_collect_cached_blocks; the rule: docs/memory.md). Caching allocator only:
  /// an expandable range has no whole free segment, direct caches nothing.
  double garbage_collection_threshold = 0;
  /// PyTorch's roundup_power2_divisions (PYTORCH_CUDA_ALLOC_CONF): entry i the divisions of the
  /// power-of-two interval [2^i, 2^(i+1)) MiB (the first from 0, the last, 16th, to the end);
  /// 0 or 1: off. Empty: off everywhere. Requests are rounded by round_size(bytes, this).
  std::vector<int64_t> roundup_power2_divisions{};
};

/// Constants of PyTorch's caching allocator (bytes).
constexpr int64_t kMinBlockSize = 512;
constexpr int64_t kSmallSize = int64_t{1} << 20;         // 1 MiB: largest small-pool request
constexpr int64_t kSmallBuffer = int64_t{2} << 20;       // 2 MiB small-pool segment
constexpr int64_t kLargeBuffer = int64_t{20} << 20;      // 20 MiB segment for requests < 10 MiB
constexpr int64_t kMinLargeAlloc = int64_t{10} << 20;
constexpr int64_t kRoundLarge = int64_t{2} << 20;        // large segments round to 2 MiB
/// The page of an expandable segment (ExpandableSegment's segment_size, as PyTorch's
/// find_expandable_block sets it): kSmallBuffer for the small pool, kLargeBuffer for the large.
constexpr int64_t expandable_page_size(bool small_pool) { return small_pool ? kSmallBuffer : kLargeBuffer; }

/// One live allocation. `address` is the block's address (bytes; a real pointer value).
struct Allocation {
  void* ptr = nullptr;
  int64_t address = 0;
  int64_t size = 0;       ///< block size (rounded)
  int64_t requested = 0;  ///< bytes asked for
  int64_t id = 0;
};

struct BlockInfo {
  int64_t address = 0;
  int64_t size = 0;
  int64_t requested = 0;  ///< 0 for free blocks
  bool allocated = false;
  std::string tag;        ///< the allocation's tag ("" for free blocks)
};

/// A segment: caching / direct, one reservation; expandable, one run of mapped pages (as
/// PyTorch's snapshot reports an expandable segment), so an unmapped hole splits a range in two.
struct SegmentInfo {
  int64_t address = 0;
  int64_t size = 0;
  bool small_pool = false;
  std::vector<BlockInfo> blocks;  ///< address order, covering the segment
  int64_t stream = 0;             ///< the stream whose requests it serves
};

/// Memory figures of a device (bytes unless noted).
struct MemoryStats {
  int64_t capacity = 0;
  int64_t allocated = 0;         ///< sum of live block sizes
  int64_t requested = 0;         ///< sum of live requested sizes
  int64_t rounding_loss = 0;     ///< allocated - requested
  int64_t reserved = 0;          ///< sum of segment sizes
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  int64_t free_in_segments = 0;  ///< reserved - allocated
  int64_t largest_free_block = 0;
  int64_t segments = 0;          ///< snapshot()'s segments (expandable: runs of mapped pages)
  int64_t alloc_retries = 0;     ///< requests that released cached segments and retried
  int64_t ooms = 0;
  /// 1 - largest free block / free bytes in reserved segments (0: no free bytes).
  double external_fragmentation = 0;
  /// PyTorch MemoryViz's measure (MemoryViz.js calculate_fragmentation): sum over free gaps of
  /// gap^2 / (sum over segments of size)^2. 1 = all free memory in one piece filling the segments;
  /// toward 0 = the free memory scattered in small gaps (also 0 with nothing free): lower is worse.
  double memviz_fragmentation = 0;
};

/// Fragmentation figures of a segment layout (used by MemoryStats and for hand-built layouts).
void fragmentation_of(const std::vector<SegmentInfo>& segments, MemoryStats& out);

/// An allocation the device cannot satisfy. `fragmentation` is true when the device had enough
/// free bytes (capacity - allocated >= request) but no free block or unreserved capacity could
/// hold the request; false for capacity (free bytes < request). what() says which, with the
/// numbers, the tags holding the most memory and advice that fits the allocator settings.
class DeviceOutOfMemory : public std::runtime_error {
 public:
  DeviceOutOfMemory(const std::string& msg, bool fragmentation, int64_t requested, int64_t free_bytes,
                    int64_t largest_free_block)
      : std::runtime_error(msg), fragmentation(fragmentation), requested(requested), free_bytes(free_bytes),
        largest_free_block(largest_free_block) {}
  bool fragmentation;
  int64_t requested, free_bytes, largest_free_block;
  /// The message without its advice (what() up to " Advice: "): the cause and the figures.
  std::string explanation;
  /// The advice's suggestions of other allocator settings ("the expandable allocator
  /// (expandable_segments), ..."; "" when none applies): candidates that no replay has checked,
  /// which a caller with the allocation actions replaces by the settings that do complete them
  /// (advice_from_replays, replay.h).
  std::string setting_advice;
  /// The rest of the advice (more capacity, another order of allocation, sharding): "" when none.
  std::string other_advice;
};

/// What an allocator did, for the memory history (PyTorch's _record_memory_history).
struct AllocatorEvent {
  enum class Kind { alloc, free, segment_alloc, segment_free, oom } kind = Kind::alloc;
  int64_t address = 0;    ///< block or segment address; for oom the device's free bytes (capacity - reserved), as
                          ///< PyTorch's snapshot records device_free, so a replay can tell capacity from fragmentation
  int64_t size = 0;       ///< block / segment bytes; for oom the rounded request
  int64_t requested = 0;  ///< bytes asked for (alloc, oom)
  std::string tag;
};
const char* to_string(AllocatorEvent::Kind k);

class DeviceAllocator {
 public:
  using Listener = std::function<void(const AllocatorEvent&)>;
  /// Receives every alloc, free, segment alloc/free and OOM (on the allocating thread).
  void set_listener(Listener l) { listener_ = std::move(l); }

  virtual ~DeviceAllocator() = default;
  /// Allocates `bytes` (> 0) tagged `tag` (weights, optimizer_state, kjt, ...). Throws
  /// DeviceOutOfMemory; HostMemoryError where the host source's mmap / mprotect fails (what()
  /// names the segment or pool range being reserved); memory already allocated is untouched.
  virtual Allocation allocate(int64_t bytes, const std::string& tag) = 0;
  /// allocate() for a request on `stream`: only free blocks of that stream's segments serve it
  /// (caching, expandable; direct ignores streams). The default (cuda_async, whose pool does
  /// its own stream ordering) ignores the stream.
  virtual Allocation allocate_on(int64_t bytes, const std::string& tag, int64_t stream) {
    (void)stream;
    return allocate(bytes, tag);
  }
  virtual void free(const Allocation& a) = 0;
  /// Releases every segment that holds no live block (torch.cuda.empty_cache); expandable:
  /// unmaps every whole page inside a free block (PyTorch's release_cached_blocks).
  virtual void empty_cache() = 0;
  /// All figures, including the fragmentation measures (walks every block).
  virtual MemoryStats stats() const = 0;
  virtual int64_t allocated_bytes() const = 0;  ///< cheap
  virtual int64_t reserved_bytes() const = 0;   ///< cheap
  /// Every segment and block, address order.
  virtual std::vector<SegmentInfo> snapshot() const = 0;
  /// Bytes held per tag, largest first.
  std::vector<std::pair<std::string, int64_t>> bytes_by_tag() const;
  const AllocatorConfig& config() const { return config_; }

  /// caching / expandable / direct, with segments from `source` (back_with_memory only;
  /// nullptr: host_segment_source()). cuda_async throws std::invalid_argument: it is made by
  /// create_cuda_async_allocator (cuda_memory.h) on the cuda backend only.
  static std::unique_ptr<DeviceAllocator> create(const AllocatorConfig& config,
                                                 std::shared_ptr<SegmentSource> source = nullptr);

 protected:
  explicit DeviceAllocator(AllocatorConfig c) : config_(c) {}
  /// The OOM error for `bytes`, classified and explained. `refused`: the segment source's
  /// refusal of the reservation the capacity had room for ("cudaMalloc refused a new 24.0 MiB
  /// segment"; "" when none): then that is the cause, said with the unreserved capacity, and
  /// the error is no fragmentation.
  DeviceOutOfMemory out_of_memory(int64_t bytes, const std::string& tag, const std::string& refused = "") const;
  void notify(AllocatorEvent::Kind k, int64_t address, int64_t size, int64_t requested, const std::string& tag) const {
    if (listener_) listener_({k, address, size, requested, tag});
  }
  AllocatorConfig config_;
  Listener listener_;
};

/// Rounds a request as PyTorch does (multiple of 512 B, at least 512).
int64_t round_size(int64_t bytes);
/// The same with roundup_power2_divisions (AllocatorConfig's), as PyTorch's round_size: where
/// the request's interval has d > 1 divisions and the request is above 512 x d bytes, it rounds
/// up to the next 1/d step of its power-of-two interval (roundup_power2_next_division: a power of
/// two stays; 5 MiB + 1 with 4 divisions in [4, 8) MiB becomes 6 MiB), else to 512 B
/// (c10/cuda/CUDACachingAllocator.cpp; CUDAAllocatorConfig::roundup_power2_divisions picks the
/// interval: 1 MiB and below the first, 2^(15+20) B and above the last).
int64_t round_size(int64_t bytes, const std::vector<int64_t>& divisions);
/// The segment size the caching allocator reserves for a rounded request.
int64_t segment_size_for(int64_t rounded);

}  // namespace embedscope::engine
