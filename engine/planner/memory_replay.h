#pragma once
// The memory estimate as a replay (planner/memory_estimate.cpp): the device buffers the
// threaded executor allocates and frees on one rank - setup's shards and dense parameters, then
// each phase of each iteration's schedule (program::step_schedule) with the buffers the phase
// takes and gives back, in the executor's order - replayed through the rank's allocator
// (memory/allocator.h, bookkeeping only), whose peak allocated bytes are the estimate. So the
// caching allocator's rounding and its unsplit block remainders are counted as a run counts them,
// and buffers that are never alive together are not summed. The ids a batch brings are a
// quantile of the features' pooling factors for generated input, and read from the file's
// batches for recorded (kjt) input. Internal to the engine.

#include <cstdint>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "embedscope/engine/memory/allocator.h"

#include "embedscope/engine/sharding/sharding.h"
#include "sharding/layout.h"

namespace embedscope::engine::detail {

/// One rank's device memory as an estimate replays it: the buffers a run takes and gives back,
/// in the run's order, through an allocator of `kind` (memory/allocator.h; bookkeeping only,
/// capacity kMaxMemoryBytes; blocks past it are counted beside it, beyond()), so the estimate counts the caching allocator's rounding, its
/// unsplit block remainders and its segments as the run does. Used by the DLRM replay below
/// (replay_memory) and by the lm_embedding estimate (planner/lm_memory_estimate.h). Besides the
/// allocator's own stats it keeps the largest block taken and the least any layout of
/// PyTorch's segments must reserve at once (ReplayedMemory::min_reserved_caching / _expandable).
/// Where a replay through an allocator of the device's capacity runs out
/// (AllocatorReplay::shortfall_at): the request it refuses, as the run would refuse it.
struct ReplayShortfall {
  int64_t request = 0;        ///< bytes asked for (0: the replay did not run out)
  const char* what = "";      ///< what the request was for: "weights", "optimizer state", "device cache", "hot-row replicas", "dense part", "buffers"
  int64_t iteration = -1;     ///< -1: setup, before the first step (the shards, the dense part); else the replayed iteration (0 = the run's first, warm-up included)
  bool fragmentation = false; ///< DeviceOutOfMemory::fragmentation: the free bytes were there, not where a segment could be made
  /// whether the same replay at the same capacity runs through under the expandable / the direct
  /// allocator (set by the replay of a rank that runs out under another allocator)
  bool expandable_serves = false, direct_serves = false;
};

class AllocatorReplay {
 public:
  /// `kind`: caching, expandable or direct (cuda_async is replayed as caching, its pool being
  /// opaque); `max_split_size` as AllocatorConfig's (0 = unlimited). `gc_threshold` (caching
  /// only; 0 = off, else 0 < t < 1: AllocatorConfig::garbage_collection_threshold, PyTorch's
  /// garbage_collect_cached_blocks) with `device_bytes` (> 0, the device's capacity): whole free
  /// large-pool segments are released once reserved bytes pass gc_threshold x device_bytes, as
  /// the run's allocator of that capacity releases them, although the bookkeeping allocator's
  /// capacity is kMaxMemoryBytes (its threshold is scaled to it); shortfall_at applies it too.
  /// Throws std::invalid_argument for a threshold outside [0, 1) or one with device_bytes <= 0.
  AllocatorReplay(AllocatorKind kind, int64_t max_split_size, double gc_threshold = 0, int64_t device_bytes = 0);
  /// A block of `bytes` (nothing, an empty Allocation, for bytes <= 0, as DeviceBuffer), taken
  /// for the context set_context last named (shortfall_at reports it).
  Allocation take(int64_t bytes);
  /// What the next takes are for, and the iteration (-1: setup); `what` a string literal.
  void set_context(const char* what, int64_t iteration) { what_ = what, iteration_ = iteration; }
  /// The recorded takes and gives again, in order, through a fresh allocator of the same kind
  /// (or `kind` when given) and max_split_size with `capacity_bytes` (PyTorch's retry included:
  /// cached segments with no live block are released before a request is refused): the first
  /// request it refuses, or request 0 when every one is served - always so for the same kind
  /// when capacity_bytes >= stats().peak_reserved, where the two replays are the same. Cost: one
  /// allocator call per recorded take and give.
  ReplayShortfall shortfall_at(int64_t capacity_bytes) const { return shortfall_at(capacity_bytes, kind_); }
  ReplayShortfall shortfall_at(int64_t capacity_bytes, AllocatorKind kind) const;
  /// Gives `a` back and empties it; nothing for an empty one.
  void give(Allocation& a);
  /// Bytes of the live blocks (those counted beside the allocator included, beyond()).
  int64_t allocated() const;
  /// The allocator's figures (peak_allocated, peak_reserved, ...). Once beyond(): allocated and
  /// peak_allocated count the blocks beside the allocator too, and peak_reserved is at least
  /// peak_allocated (segments and fragmentation figures are the allocator's own).
  MemoryStats stats() const;
  /// Whether a take ran past the allocator's capacity, kMaxMemoryBytes (1 PiB, the most a device
  /// may have): such a block (and every later one the allocator cannot hold) is counted beside
  /// the allocator, its size rounded to 512 B, so the replay goes on and its peak is more than
  /// any device holds (sums saturate at INT64_MAX). Its take is recorded, so shortfall_at refuses it.
  bool beyond() const { return next_beyond_id_ < -1; }
  int64_t largest_block() const { return largest_block_; }
  int64_t min_reserved_caching() const { return min_reserved_caching_; }
  int64_t min_reserved_expandable() const { return min_reserved_expandable_; }

 private:
  std::unique_ptr<DeviceAllocator> alloc_;
  AllocatorKind kind_;
  int64_t max_split_size_;
  double gc_threshold_;  // of the device's capacity (0: off)
  // every take (bytes > 0: its request; its context) and give (bytes 0: `take`, the index of the
  // take it gives back), in order, for shortfall_at
  struct Op {
    int64_t bytes = 0;
    size_t take = 0;
    const char* what = "";
    int64_t iteration = -1;
  };
  std::vector<Op> ops_;
  std::unordered_map<int64_t, size_t> op_of_id_;  // live allocation id -> the index of its take in ops_
  const char* what_ = "buffers";
  int64_t iteration_ = -1;
  int64_t small_live_ = 0;             // bytes of the live blocks of the small pool (<= 1 MiB)
  std::multiset<int64_t> large_live_;  // sizes of the live blocks of the large pool
  int64_t large_sum_ = 0;
  int64_t largest_block_ = 0, min_reserved_caching_ = 0, min_reserved_expandable_ = 0;
  // blocks beyond the allocator's capacity (beyond()): their ids -1, -2, ...; the live bytes;
  // the peak of the allocator's live bytes plus these
  int64_t next_beyond_id_ = -1, beyond_live_ = 0, beyond_peak_ = 0;
};

/// Mean and variance of the ids in one bag of a feature: a fixed length `mean` (variance 0), or
/// Poisson(mean) clamped to at most `max`, as input/source.h draws them (the clamped
/// distribution's exact moments, summed over k = 0..max with the tail mass at max). 0, 0 for
/// mean 0.
struct BagMoments {
  double mean = 0, variance = 0;
};
BagMoments bag_length_moments(const PoolingFactor& p);

/// The share of a row-bucketized slot's ids in its row range as the run realizes it
/// (input/realized_share.h realized_id_share: a permuted Zipf feature's 4,096 hottest ranks
/// where its permutation puts them, the rest of the mass spread evenly); 1 for a slot that
/// receives every id of its bags. Since plan42 the planner's expected lookups use the same
/// function; the per-feature tables are cached per thread there.
class SlotShares {
 public:
  SlotShares(const WorkloadSpec&, const Layout&) {}
  double share(const WorkloadSpec& spec, const Slot& sl) const;
};

/// The ids one rank receives for its slots in one batch, at the expected count plus `z`
/// standard deviations (over the slots, every source rank's B bags each: a bag's length
/// moments thinned by the slot's share, SlotShares, each id independently in
/// the range), at most every bag at its maximum length.
int64_t received_ids_quantile(const WorkloadSpec& spec, const Layout& L, const SlotShares& shares, int rank,
                               double z);

/// The z of received_ids_quantile for a run of `batches` batches: the largest batch of the run
/// exceeds mean + z sd with probability at most 5% under a normal approximation (the union
/// bound: batches x P(N(0, 1) > z) = 0.05). 1 batch: 1.645; 4: 2.24; 1,000: 3.89.
double max_quantile_z(int64_t batches);

/// The device copies the cuda rank makes for each call of a dense part that is not resident
/// (DCN-v2, "dense": null; exec/threaded/rank_setup.cpp dense_layers_on_gpu) in one train phase - the
/// replay uses it for those only - in call order - bottom MLP forward, dot
/// interaction forward, top MLP forward, the loss, top MLP backward, dot backward, bottom MLP
/// backward - each call the floats of its buffers in the order it takes them (given back in
/// reverse when it returns): a layer's forward x, W, b, y (B x in, out x in, out, B x out); its
/// backward x, W, y, dy, dW, db and dx (not for the first bottom layer); the dot interaction's
/// x0 and r, backward x0, dr, dx0; the loss's logits, labels and dlogits (B each; the only call
/// without a dense part). The dense SGD step (2 x num_params) is not in it. Local batch B.
std::vector<std::vector<int64_t>> dense_device_calls(const WorkloadSpec& spec, const std::vector<int64_t>& dims, int64_t B);

/// What the replay of one rank found, bytes: the shards' buffers rounded to 512 B each, the
/// peak as the allocator counts allocated blocks (unsplit remainders included).
struct ReplayedMemory {
  int64_t weights = 0;          ///< the shards' weight blocks
  int64_t optimizer_state = 0;  ///< the shards' optimizer state blocks
  int64_t dense = 0;            ///< dense parameters + gradients, and the activations' block (on
                                ///< cuda: the resident layout's for dot / cat, else with the
                                ///< largest dense call's device copies under it); each the
                                ///< bytes asked for, 512 B rounded (not the allocator's block, whose
                                ///< unsplit slack depends on the plan: it counts in the peak)
  int64_t peak = 0;             ///< peak allocated over the replayed iterations
  int64_t ahead_at_peak = 0;    ///< at the peak: blocks of batches after the one training
  int64_t cache = 0;            ///< host_cached shards' device caches (model/host_cache.h)
  int64_t host = 0;             ///< host memory: host / host_cached shards' rows, state, LFU counts (not replayed)
  int64_t largest_block = 0;    ///< the largest block taken (rounded to 512 B)
  /// The most any layout of PyTorch's segments must reserve at once, over the replay (bytes):
  /// at each allocation, the large pool's live blocks - caching: at least the segment of the
  /// largest (20 MiB for 1-10 MiB, else 2 MiB multiples) and their sum; expandable: their sum
  /// in 20 MiB pages (the large pool's page, expandable_page_size) - plus the small pool's
  /// (blocks <= 1 MiB) in 2 MiB segments or pages.
  int64_t min_reserved_caching = 0;
  int64_t min_reserved_expandable = 0;
  /// the peak bytes the replay's allocator reserved (its segments; capacity unbounded, so no
  /// cached segment was ever released to serve a request): a device of this many bytes serves
  /// every request of the replay in its order
  int64_t peak_reserved = 0;
  /// when peak_reserved exceeds devices.memory_bytes (caching, expandable or direct; not
  /// cuda_async, whose pool is opaque): where the same replay at that capacity runs out
  /// (AllocatorReplay::shortfall_at), else nothing (request 0)
  ReplayShortfall shortfall;
  /// The replay's allocator figures at the end of each replayed iteration ([0] the run's first,
  /// warm-up included; min(warmup_steps + steps, 8) of them), as a run's rank records its
  /// allocator at each step end (threaded/memory_records.h arena_counter): allocated, reserved,
  /// peaks so far, segments, largest free block, fragmentation. Empty unless replay_memory is
  /// asked for them (step_ends = true: the simulated executor's memory counters, tester51 F7).
  std::vector<MemoryStats> step_ends;
};

/// Per rank, replays setup and the first min(warmup_steps + steps, 8) iterations of `rank` (later
/// iterations repeat the steady state's sizes, and the last two start fewer batches) with
/// batches of received_ids_quantile's size (z of max_quantile_z over all the run's iterations), through an allocator of spec.memory's kind (caching
/// for cuda_async), capacity unbounded (the fit is checked afterwards). Each data_parallel table
/// takes its dense gradient (rows x dim fp32) and its rows' touched flags (rows fp32) after the
/// fused optimizer, one table at a time (sharding/data_parallel.cpp): exact sizes, whatever the
/// ids (e.g. 1,000 x 64: 256,000 + 4,000 B, each rounded to 512 B). With devices.backend cuda
/// a dot / cat dense part is resident on the device: its activations' block has the resident
/// layout (dense_resident_activation_floats_per_sample, model/dense.h) and nothing else is
/// copied; DCN-v2 and "dense": null keep the per-call path: each dense call's copies
/// (dense_device_calls) under the activations' block, the SGD step's parameters and gradients
/// before the batch's gradients go. Not replayed: memory compaction, live rebalancing, the cuda backend's copies of the
/// lookups' ids and the updates' rows (transient per shard; below the dense part's in every
/// preset measured, tests/engine/planner/cuda_staging_estimate_test.cpp). Cost O(iterations x (slots +
/// features + sharding modules)) allocator calls a rank.
std::vector<ReplayedMemory> replay_memory(const WorkloadSpec& spec, const ShardingPlan& plan, const Layout& L);

/// replay_memory with `shares` built by the caller: SlotShares depends on the layout only
/// through Layout::table_of (each feature's table), which every plan of a spec shares, so one
/// SlotShares(spec, Layout(spec, any plan)) serves every plan of that spec - what the
/// rebalancing policy does, whose search estimates a plan per candidate (building it was ~0.9 of
/// the ~1 ms a rank's estimate took on hot_table_straggler: 4 Zipf features x 4,096 rows).
/// `step_ends`: also fill each ReplayedMemory::step_ends (one allocator stats() a replayed
/// iteration: O(segments + blocks) each).
std::vector<ReplayedMemory> replay_memory(const WorkloadSpec& spec, const ShardingPlan& plan, const Layout& L,
                                          const SlotShares& shares, bool step_ends = false);

/// Rank `rank`'s DeviceMemoryEstimate from its replay `m`: what estimate_memory(spec, plan)[rank]
/// is when `m` is replay_memory(spec, plan, ...)[rank] (the breakdown, peak_reserved, shortfall).
DeviceMemoryEstimate estimate_from_replay(const ReplayedMemory& m, int rank);

/// The replay of one rank, `rank` in [0, L.world): replay_memory(spec, plan, L, shares)[rank] at
/// about 1 / world of its cost (each rank's replay is independent). Throws std::out_of_range
/// for a rank outside the world.
ReplayedMemory replay_rank_memory(const WorkloadSpec& spec, const ShardingPlan& plan, const Layout& L, int rank,
                                  const SlotShares& shares);

/// estimate_memory(spec, plan) (sharding.h) with `shares` built by the caller (replay_memory's
/// overload above): the same values.
std::vector<DeviceMemoryEstimate> estimate_memory(const WorkloadSpec& spec, const ShardingPlan& plan,
                                                  const SlotShares& shares);

/// estimate_memory(spec, plan)[rank] from the replay of that rank alone: what the rebalancing
/// policy checks first on the rank a move adds shards to (rebalance/policy.cpp), so a move
/// refused for memory costs one rank's replay, not every rank's. Throws std::out_of_range for a
/// rank outside the plan's world.
DeviceMemoryEstimate estimate_rank_memory(const WorkloadSpec& spec, const ShardingPlan& plan, int rank,
                                          const SlotShares& shares);

/// What every rank holds under any sharding plan and storage option of `spec` when its dense
/// forward takes its activations (Replay::train): the dense part's parameters and gradients (one
/// block), the activations' block (the cuda backend's resident layout where it applies; without
/// the per-call copies), and the batch's pooled embeddings and their gradients (B x dim fp32 of
/// every feature, twice), each block rounded as the allocator rounds one (round_size). These are
/// alive together in every plan's replay, so their sum is a lower bound of every plan's
/// DeviceMemoryEstimate::total(): the part no sharding type, placement or precision changes.
/// Example (tests/engine/planner/plan_independent_memory_test.cpp): tiny at batch 64.
struct PlanIndependentMemory {
  int64_t dense_params = 0;      ///< 2 x num_params fp32 (parameters + gradients), bytes
  int64_t activations = 0;       ///< B x activation floats a sample, bytes
  int64_t pooled = 0;            ///< 2 x sum over features of B x dim fp32, bytes
  int64_t bytes_per_sample = 0;  ///< activations + pooled of one sample (unrounded), bytes
  int64_t total() const { return dense_params + activations + pooled; }
};
/// `batch_size` samples a rank (-1: spec.batch_size).
PlanIndependentMemory plan_independent_memory(const WorkloadSpec& spec, int64_t batch_size = -1);

/// Throws SpecError ("/devices/memory_bytes: ...", one line) when plan_independent_memory(spec)
/// exceeds devices.memory_bytes: no plan of the planner, sharding type or storage option can fit,
/// so plan_search refuses before searching and check_memory_fits before listing ranks (tester46
/// F10: a 6-112 s search, then one line per rank). The message gives the terms, the batch size
/// and what to lower: the batch size (with the most samples a rank this part allows, found by
/// bisection over plan_independent_memory), the dense part when its parameters and gradients
/// alone exceed the device, or the device's memory when not one sample a rank fits.
void check_plan_independent_memory(const WorkloadSpec& spec);

}  // namespace embedscope::engine::detail
