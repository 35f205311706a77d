#pragma once
// The device side of a shard whose rows live in host memory (TableSpec::placement host or
// host_cached; FBGEMM's EmbeddingLocation HOST and MANAGED_CACHING). The shard's fp32 rows
// (num_rows x dim) and its fp32 optimizer state stay in host memory, owned by the caller and
// passed to every call; this class keeps what lives on the device - the cache of a host_cached
// shard - and moves rows between the two, counting every row and byte it moves.
//
// A lookup (gather) copies the distinct rows of the ids into a device buffer of U x dim floats
// (U distinct rows) and rewrites the ids into that buffer, so that pooled_lookup on the buffer
// sums the same fp32 rows in the same order as on the full shard: the results are bit for bit
// those of the device placement. An update (update) gathers the gradient's rows and their
// optimizer state rows the same way, applies apply_row_optimizer there and writes them back.
//
// Rows fetched (rows_fetched) are FBGEMM's unique misses (uvm_cache_stats' num_unique_misses,
// per prefetch / lookup call): the distinct rows a lookup or a prefetch moves host -> device. An
// update's reads of rows not cached move bytes (bytes_h2d, and bytes_d2h for the write back) but
// are not rows fetched (FBGEMM's backward updates such rows in UVM in place), so a step's rows
// fetched are its lookup's misses plus its prefetched rows; the simulated executor counts the
// same (cost/cache_model.h). The executors call gather() once per shard and step, on the ids of
// all the shard's features, as FBGEMM looks up all features of a TBE in one call.
//
//  host:         every distinct row of a lookup is a miss fetched from host memory
//                (rows_fetched += U, bytes_h2d += 4 U dim); an update reads its rows and
//                state rows and writes both back (bytes_h2d and bytes_d2h += 4 G (dim + s),
//                G the gradient's rows, s the state floats a row: sgd 0, rowwise_adagrad 1,
//                adam 2 dim).
//  host_cached:  a device cache of `slots` rows (ceil(cache_load_factor x num_rows), at most
//                num_rows), FULLY ASSOCIATIVE (any row in any slot). FBGEMM's cache is 32-way set
//                associative (a row may only go to the 32 slots of the set its hash picks), so
//                it has conflict misses this cache has not: its hit rates are an upper bound of
//                FBGEMM's for the same policy and size. The optimizer state is not cached (as in
//                FBGEMM, whose momentum of a MANAGED_CACHING table stays in UVM): updates move it
//                as for `host`.
//    lookup: a distinct row in the cache is a hit (copied from its slot into the buffer, a
//      device-to-device copy not counted as moved); a miss is fetched from host memory and
//      inserted into a slot: an empty slot first, else the policy's victim among the slots
//      that this lookup has not used (the rows of the current lookup are locked, as FBGEMM
//      locks the rows of the batch being prefetched). A victim that an update changed (dirty)
//      is written back to host memory first (bytes_d2h += 4 dim). A miss with no victim left
//      (more distinct rows than slots) or, under lfu, one less frequent than the victim, is not
//      inserted: it is read from host memory for this lookup only, as FBGEMM reads a row it
//      could not insert from UVM.
//    lru: the victim is the slot whose row was used longest ago (a counter of lookups; rows of
//      one lookup share its tick, ties go to the lower slot) - FBGEMM's lru_cache_insert with
//      its timestep per slot.
//    lfu: every row (cached or not) has a count of the ids that named it, over the whole run
//      (FBGEMM's lfu_state: int64 per row, in host memory, counted in host_bytes); the victim
//      is the slot whose row has the lowest count (ties: the lower slot), and a miss is
//      inserted only if its count is at least the victim's (FBGEMM's lfu_cache_insert keeps
//      the more frequent row).
//    update: a cached row is updated in its slot and marked dirty (no write back until it is
//      evicted or flushed); a row not cached (evicted since its lookup, or never inserted) is
//      read (bytes_h2d; not a row fetched), updated and written straight back (bytes_d2h).
//    prefetch (TableSpec::prefetch_pipeline; FBGEMM's prefetch pipeline, pytorch/FBGEMM#1893):
//      the ids of a batch to be looked up later; its distinct rows missing from the cache are
//      fetched into it (rows_fetched, bytes_h2d, and prefetched_rows / prefetch_bytes_h2d; not
//      cache hits or misses, which count lookups) and every row of the batch is PINNED (its
//      cached rows first, so that none of its misses evicts a row of the batch): no
//      victim until a lookup uses its slot (or the next prefetch begins, for a pinned row no
//      lookup used). While it runs, the slots of the lookups since the previous prefetch are
//      locked too (the batch in flight, whose backward still reads its rows: FBGEMM's
//      lxu_cache_locking_counter), so a prefetch evicts only rows of older batches; a row with
//      no victim left (or, under lfu, rarer than the victim: its count plus this batch's ids of
//      it) is not prefetched, and its lookup fetches it as before. A prefetch counts as one use
//      of its rows (lru tick); lfu's counts are not changed (the lookup counts the ids).
//      Example (4 slots, lru; gathers g and prefetches p of batches {0,1} {2,3} {4,5} {0,2} in
//      the order g0 p1 g1 p2 g2 p3 g3): g0 misses 0 and 1; p1 fetches 2 and 3 into the free
//      slots; g1 hits both; p2 fetches 4 and 5 over 0 and 1 (2 and 3 locked by g1); g2 hits; p3
//      pins 2 (cached) and fetches 0 over 3 (4 and 5 locked by g2); g3 hits both: hits 6 of 8
//      (without prefetch, g0 g1 g2 g3: 1 of 8), rows fetched 7 either way.
//
// Device memory: the cache (an arena block of slots x dim x 4 bytes, tag "embedding_cache", held
// for the run) and, for the length of one lookup or update, its buffers (tag "host_fetch").
// Not thread safe: one rank's compute thread calls it.
//
// On a device whose memory the host cannot touch (the cuda backend's GPU; its host stand-in
// TrainerOptions::emulate_device), the store is given a HostCacheDevice: the same decisions and
// counters, but every row it moves goes through that device's copies (a fetch is a host ->
// device copy into the buffer or the slot, a hit or an insertion a device -> device copy, an
// eviction or a write back a device -> host copy) and an update runs the device's row optimizer
// (RankDevice::update) on the gathered rows. The host rows are pageable host memory (not
// pinned: each copy is one cudaMemcpyAsync of one row, staged by the driver), so the results and
// the counters equal the host path's bit for bit.
//
// Batched moves, pinned host rows (issue 16 / 14; FBGEMM's UVM caching). With a device, the host
// rows and the optimizer state are PINNED once (pin(), at setup; on a GPU cudaHostRegister,
// mapped) and the device reads and writes them in place through their device pointer: no row is
// copied on its own. Every call makes a fixed number of copies, whatever its rows (U distinct
// rows of a lookup, E dirty victims, I insertions, G gradient rows, M prefetched rows; each copy
// one HostCacheDevice call, on a GPU one cudaMemcpyAsync or one copy_rows_cuda launch):
//   gather, host:         2 (the row indices up; one copy_rows: host rows -> the buffer)
//   gather, host_cached:  2 + [E > 0] + [I > 0]: the indices up (one upload of every index list
//     of the call); the dirty victims slots -> host rows; ONE gather of hits and misses into the
//     buffer (a hit from its slot, a miss from the host rows: FBGEMM's forward, which reads a row
//     from lxu_cache_weights when lxu_cache_locations has it and from the UVM weights otherwise);
//     the inserted rows buffer -> their slots (FBGEMM's lxu_cache_populate, one kernel);
//   update:  4 + 2 ([s1 > 0] + [s2 > 0]) (sgd 4, rowwise_adagrad 6, adam 8): the indices up, the
//     gradient up, the rows gathered (slot or host rows), each state buffer gathered, the device's
//     row optimizer, the rows written back (to the slot, marked dirty, or to the host rows), each
//     state buffer written back; the last copy waits for the device (the host may read them);
//   prefetch: 1 + [E > 0] + [M > 0] (none when E + M = 0); flush: 2 when a row is dirty (waits).
// Option (a) of the issue, zero-copy through mapped pinned memory, not (b) host-side packing
// into a staging buffer: (b) reads every row twice on the host (pack, then DMA) and needs one
// more buffer and a host pass a step; (a) is what FBGEMM's UVM path does (the rows read by the
// kernel over PCIe, 128 B a warp), and the cache's write-backs (lxu_cache_flush) go the same way.
// If the memory cannot be pinned, pin() throws and the run is REFUSED (std::runtime_error naming
// the table, shard and bytes), with no fallback to pageable memory: a kernel cannot read
// pageable host memory, so a fallback would be a second, per-row transfer path that is 10-100x
// slower and would silently measure something other than what the spec asked for (the plan's
// memory estimate already counts these host bytes).

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/memory/memory.h"
#include "embedscope/engine/workload/enums.h"

namespace embedscope::engine {

/// What a shard in host memory moved (summed until take_counters), in the units of
/// sessions::LoadCounter's fields of the same names.
struct HostTransferCounters {
  int64_t cache_hits = 0;    ///< distinct rows of lookups found in the cache
  int64_t cache_misses = 0;  ///< distinct rows of lookups not in it (every row under `host`)
  int64_t rows_fetched = 0;  ///< distinct rows lookups and prefetches copied host -> device (their misses; not updates' reads)
  int64_t bytes_h2d = 0;     ///< bytes host -> device: rows and optimizer state rows
  int64_t bytes_d2h = 0;     ///< bytes device -> host: updated rows, evicted dirty rows, state rows
  int64_t prefetched_rows = 0;     ///< of rows_fetched: rows a prefetch fetched into the cache
  int64_t prefetch_bytes_h2d = 0;  ///< of bytes_h2d: the bytes of those rows (4 dim each)
};

/// Cache slots of a host_cached shard of `num_rows` rows: ceil(load_factor x num_rows), at least
/// 1 and at most num_rows (load_factor in (0, 1]). Example: 0.2 x 1,000 -> 200; 0.3 x 7 -> 3
/// (ceil(2.1)); 0.001 x 10 -> 1. Throws std::invalid_argument for a load factor outside (0, 1]
/// or num_rows < 1.
int64_t cache_slots(double load_factor, int64_t num_rows);

/// Device bytes the cache of a host_cached shard of num_rows x num_cols takes: its
/// cache_slots(load_factor, num_rows) fp32 rows in one arena block, rounded as the allocator
/// rounds every request (round_size: a multiple of 512 B, at least 512). The one figure of a
/// cache's device bytes: `plan`'s device memory per rank and per table, the run's table
/// storage (`run --json`, `stats`) and the workbench all read it. Example: 1 slot x 16 columns
/// = 64 B of rows in a 512 B block -> 512; 10,000 x 64 x 4 = 2,560,000 (a multiple of 512).
/// 0 for num_rows or num_cols < 1. Throws what cache_slots throws.
int64_t cache_device_bytes(double load_factor, int64_t num_rows, int64_t num_cols);

/// The device of a HostRowStore whose arena is device memory (the cuda backend: exec/threaded
/// adapts its RankDevice, host_cache_device in exec/device/rank_device.h). Pointers named `dev`
/// are device memory, `host` host memory; all copies are in order with the device's work.
class HostCacheDevice {
 public:
  virtual ~HostCacheDevice() = default;
  /// Host to device (the host bytes may be reused on return).
  virtual void to_device(void* dev, const void* host, int64_t bytes) const = 0;
  /// Device to host; returns when the bytes are there.
  virtual void to_host(void* host, const void* dev, int64_t bytes) const = 0;
  /// Device to device.
  virtual void on_device(void* dev_dst, const void* dev_src, int64_t bytes) const = 0;
  /// copy_rows (kernels/row_copy.h) on the device: bases device memory or pin_host pointers,
  /// index arrays device memory; one kernel; `wait`: returns when the rows are written.
  virtual void copy_rows(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows,
                         float* dst, float* dst_alt, const int64_t* dst_rows, bool wait) const = 0;
  /// Pins host memory for the device and returns the pointer its kernels use for it
  /// (RankDevice::pin_host; throws std::runtime_error naming `what` and the bytes).
  virtual void* pin_host(void* host, int64_t bytes, const std::string& what) const = 0;
  /// Ends a pin_host (RankDevice::unpin_host). Never throws.
  virtual void unpin_host(void* host, int64_t bytes) const noexcept = 0;
  /// apply_row_optimizer on device memory, as RankDevice::update (rows: the shape of the shard
  /// whose plan serves it; row_ids index `weights` and the state).
  virtual void update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1, float* momentum2,
                      int64_t rows, int64_t cols, const int64_t* row_ids, const int64_t* offsets, int64_t n,
                      const float* values) const = 0;
};

class HostRowStore {
 public:
  /// A shard of num_rows x dim fp32 rows in host memory. placement host (no cache; policy and
  /// slots ignored) or host_cached (`slots` in [1, num_rows] cache rows allocated from `arena`,
  /// which may throw OomError). `opt` fixes the state floats a row (sgd 0, rowwise_adagrad 1,
  /// adam 2 dim). `arena` outlives the store. `device` (it outlives the store too): the device
  /// whose memory `arena` holds (see the header), nullptr where the arena is host memory (the cpu
  /// backend). Throws std::invalid_argument for placement device, dim < 1, num_rows < 1 or slots
  /// outside [1, num_rows] under host_cached.
  HostRowStore(TablePlacement placement, CachePolicy policy, OptimizerType opt, int64_t num_rows, int64_t dim,
               int64_t slots, DeviceArena* arena, const HostCacheDevice* device = nullptr);

  /// Unpins what pin() pinned (the host memory must still be there: the caller's rows and state
  /// outlive the store).
  ~HostRowStore();
  HostRowStore(const HostRowStore&) = delete;
  HostRowStore& operator=(const HostRowStore&) = delete;

  /// With a device: pins the shard's host rows (num_rows x dim floats) and fp32 state (its
  /// spans) for it, once (see the header), `what` naming the shard in errors (e.g. "table 't3'
  /// shard 0"). The later calls must pass the same host_rows / state (std::logic_error
  /// otherwise); a call that comes first pins its memory itself. Throws std::runtime_error
  /// (RankDevice::pin_host) when the memory cannot be pinned: the run is refused. No-op without
  /// a device.
  void pin(float* host_rows, RowOptimizerState state, const std::string& what);

  /// The lookup of ids[0, n_ids) (local rows in [0, num_rows)): returns a device buffer
  /// (tag "host_fetch") of the U distinct rows' current values, U x dim (with a device: in its
  /// device_data(); the host copy is not written), and sets local[i] to
  /// the buffer row of ids[i] (local resized to n_ids). host_rows: the shard's rows in host
  /// memory (num_rows x dim; written when a dirty row is evicted). Cost O(n_ids log n_ids +
  /// U dim), plus O(U log slots) under host_cached. OomError from the arena.
  DeviceBuffer<float> gather(float* host_rows, const int64_t* ids, int64_t n_ids, std::vector<int64_t>& local);
  /// apply_row_optimizer(opt, iteration, ...) for grad's rows (distinct, ascending): each row's
  /// current value (its cache slot, else host memory) and its state row (host memory) are
  /// gathered into device buffers, updated there, and written back as the header says. The
  /// result equals apply_row_optimizer on the host rows and state in place, bit for bit.
  void update(const OptimizerSpec& opt, int64_t iteration, float* host_rows, RowOptimizerState host_state,
              const SparseGrad& grad);
  /// Fetches the rows of ids[0, n_ids) (a later lookup's, local rows in [0, num_rows)) missing
  /// from the cache into it and pins the batch's rows until a lookup uses them (see the header:
  /// prefetch). Writes dirty victims back to host_rows. Cost O(n_ids log n_ids + U log slots +
  /// M dim) for U distinct rows, M fetched. Throws std::invalid_argument unless host_cached.
  void prefetch(float* host_rows, const int64_t* ids, int64_t n_ids);
  /// Whether slot s is pinned by a prefetch that no lookup has used yet (tests).
  bool pinned(int64_t s) const { return pinned_[static_cast<size_t>(s)] != 0; }
  /// Writes every dirty cached row back to host_rows (they stay cached, now clean), so that
  /// host_rows holds every row's current value. Counted in bytes_d2h.
  void flush(float* host_rows);
  /// The counters since the last call, then zeroed.
  HostTransferCounters take_counters();

  TablePlacement placement() const { return placement_; }
  int64_t slots() const { return static_cast<int64_t>(slot_row_.size()); }
  /// Device bytes of the cache: its arena block, slots x dim x 4 rounded up to the allocator's
  /// 512 B (round_size; cache_device_bytes); 0 under host.
  int64_t cache_bytes() const { return slots() > 0 ? round_size(slots() * dim_ * 4) : 0; }
  /// Host bytes the store itself keeps: under host_cached its row -> slot index (8 num_rows),
  /// and lfu's counts (another 8 num_rows); 0 under host. The rows and the state are the
  /// caller's. (Not counted: the ordered set of slots by lru tick / lfu count, 3 words a slot of
  /// std::set nodes; FBGEMM keeps its per-slot state on the device.)
  int64_t host_side_bytes() const { return static_cast<int64_t>(row_slot_.size() + lfu_count_.size()) * 8; }
  /// The slot holding local row r, or -1 (tests, and the cache's own lookups). O(1).
  int64_t slot_of(int64_t r) const { return row_slot_[static_cast<size_t>(r)]; }
  /// The local row in slot s, or -1 when empty (tests).
  int64_t row_in_slot(int64_t s) const { return slot_row_[static_cast<size_t>(s)]; }
  /// Whether slot s holds a row an update changed that host memory does not have yet (tests).
  bool dirty(int64_t s) const { return dirty_[static_cast<size_t>(s)] != 0; }
  /// The device given at construction (nullptr: host memory).
  const HostCacheDevice* device() const { return dev_; }

 private:
  /// update() with a device: the rows and state gathered there, its row optimizer, written back.
  void update_on_device(const OptimizerSpec& opt, int64_t iteration, float* host_rows, RowOptimizerState host_state,
                        const SparseGrad& grad);
  /// The cache's rows: device memory with a device, else the arena block the host reads.
  float* cache_rows() { return dev_ ? cache_.device_data() : cache_.data(); }
  /// n floats host -> buffer / buffer -> host / buffer -> buffer: memcpy, or the device's copies.
  void h2d(float* dst, const float* src, int64_t n);
  void d2h(float* dst, const float* src, int64_t n);
  void d2d(float* dst, const float* src, int64_t n);
  /// gather() / prefetch() / flush() with a device: the batched copies (see the header).
  DeviceBuffer<float> gather_on_device(float* host_rows, const std::vector<int64_t>& uniq,
                                       const std::vector<int64_t>& times);
  void prefetch_on_device(float* host_rows, const std::vector<int64_t>& rows, const std::vector<int64_t>& slots_of);
  /// The device pointer of pinned host memory `host` (pinning it on first use); throws
  /// std::logic_error for other memory than the pinned one.
  float* pinned_ptr(float*& pinned_host, float*& pinned_dev, int64_t& pinned_bytes, float* host, int64_t bytes,
                const char* what);
  /// Index lists up to the device in one copy: a device buffer of their concatenation.
  DeviceBuffer<int64_t> upload(const std::vector<int64_t>& idx);
  /// Slot for a missed row, or -1 when it is not to be inserted (no unlocked slot, or lfu keeps
  /// the victim); writes a dirty victim back and empties its slot. O(log slots).
  /// `extra`: ids of the row not yet in its lfu count (a prefetch's), added for the comparison.
  int64_t victim_for(int64_t row, float* host_rows, int64_t extra = 0);
  /// The eviction key of slot s: its last lookup's tick (lru) or its row's count (lfu).
  int64_t key(int64_t s) const;

  TablePlacement placement_;
  CachePolicy policy_;
  int64_t num_rows_, dim_, state1_per_row_, state2_per_row_;
  DeviceArena* arena_;
  const HostCacheDevice* dev_ = nullptr;
  DeviceBuffer<float> cache_;            // slots x dim
  std::vector<int64_t> slot_row_;        // per slot: its local row, -1 empty
  std::vector<int64_t> row_slot_;        // per row: its slot, -1 (host_cached only)
  std::vector<int64_t> last_use_;        // per slot: tick of its last lookup (lru)
  std::vector<uint8_t> dirty_;           // per slot
  std::vector<uint8_t> pinned_;          // per slot: pinned by a prefetch, no lookup used it yet (out of unlocked_)
  std::vector<uint8_t> in_flight_;       // per slot: a lookup since the last prefetch used it (locked during a prefetch)
  std::vector<int64_t> lfu_count_;       // per row: ids that named it (lfu)
  int64_t tick_ = 0;                     // lookups so far
  int64_t next_free_ = 0;                // slots [0, next_free_) hold rows
  // the filled slots that the current lookup has not used, by (key, slot): the victim is the first
  std::set<std::pair<int64_t, int64_t>> unlocked_;
  HostTransferCounters counters_;
  // with a device: evicted dirty rows (slot, row) not yet written back (the batched copy does)
  std::vector<std::pair<int64_t, int64_t>> pending_evict_;
  // with a device: the pinned host rows and state (host pointer, device pointer, bytes)
  std::string what_ = "a host table's shard";
  float *rows_host_ = nullptr, *rows_dev_ = nullptr, *m1_host_ = nullptr, *m1_dev_ = nullptr, *m2_host_ = nullptr,
        *m2_dev_ = nullptr;
  int64_t rows_bytes_ = 0, m1_bytes_ = 0, m2_bytes_ = 0;
};

}  // namespace embedscope::engine
