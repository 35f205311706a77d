#pragma once
// One sharding type's part of a step, behind one interface (TorchRec's EmbeddingSharding: the
// output dist of the pooled embeddings and, in reverse, the gradient dist). Each module emits
// its ops into the step program (program/program_sink.h), each tagged with the module's own op
// kind (ProgramSink::own), and runs them when an executor that interprets the program hands it
// one (EmbeddingSharding::run): it packs, sends and unpacks its buffers through the rank's
// RankContext. The executors hold the modules a plan needs (embedding_shardings), dispatch each
// op to its owner and never name a sharding type.
//   pooled_all_to_all.cpp  table_wise and column_wise: all-to-all of B x cols blocks
//   row_wise.cpp           row_wise: reduce-scatter of partial sums / all-gather of gradients
//   table_row_wise.cpp     table_row_wise: reduce-scatter in the node, all-to-all across nodes
//   data_parallel.cpp      data_parallel: no dist; local lookups on every replica, each
//                          replica's dense gradient all-reduced (DDP) and applied on every replica
//   hot_rows.cpp           the hot rows of row-split tables (TableSharding::hot_rows): replicas
//                          looked up locally, gradients all-reduced as a dense block
// A new sharding type is a new file here plus its entry in the spec's enum table and in
// embedding_shardings(). Internal to the engine.

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "comm/collectives.h"
#include "sharding/layout.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/memory/memory.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::engine {
struct ProgramOp;
namespace program {
class ProgramSink;
struct OpOwner;
}

namespace sharding {

/// The process groups of a rank: every rank, the ranks of its node, the ranks with its local
/// rank across nodes (table_row_wise's hierarchy).
enum class GroupKind { world, node, cross };

/// What a sharding module needs of the rank that runs it.
class RankContext {
 public:
  virtual ~RankContext() = default;
  virtual int rank() const = 0;
  virtual const WorkloadSpec& spec() const = 0;
  virtual const detail::Layout& layout() const = 0;
  /// n floats in the rank's device arena, tagged for the memory view (compute thread only:
  /// the arena belongs to it). Throws OomError when the device is full.
  virtual DeviceBuffer<float> buffer(const char* tag, size_t n) = 0;
  /// The rank's process group (node and cross exist when layout().hierarchical).
  virtual detail::Collectives& group(GroupKind g) = 0;
  /// On the comm thread: runs `fn` (one collective on group g) as a span `name` on the comm lane.
  virtual void on_comm_lane(GroupKind g, const char* name, const std::function<void()>& fn) = 0;
  /// On the compute thread: runs `fn` on the comm worker as a span `name` and waits for it.
  virtual void comm(GroupKind g, const char* name, const std::function<void()>& fn) = 0;
  /// On the compute thread: queues `fn` (the collectives of program op `op`, each run through
  /// on_comm_lane) for the comm worker without waiting. The ops that wait for it (their
  /// ProgramOp::waits_for, or the batch's next sync point) wait. Ops queued one after another
  /// in the program (no other op between) run as one job: when one fails, the rest do not run.
  virtual void queue(const ProgramOp& op, std::function<void()> fn) = 0;
  /// Where the quantization error of the forward (output dist) and backward (grad dist)
  /// collectives accumulates (qcomms; written on the comm thread).
  virtual QuantError* forward_error() = 0;
  virtual QuantError* backward_error() = 0;
  /// Index among this rank's slots (layout().slots_to[rank]) of global slot `slot`, and of the
  /// slot of feature `f` on this rank (row-wise tables have one on every rank). Throw
  /// std::logic_error when absent.
  virtual size_t local_slot(int slot) const = 0;
  virtual size_t local_slot_of_feature(int f) const = 0;
  /// n int64 elements in the rank's device arena, tagged (compute thread only).
  virtual DeviceBuffer<int64_t> index_buffer(const char* tag, size_t n) = 0;
  /// On the compute thread: runs `fn` as a span `name` of category `cat` on the compute lane.
  virtual void compute(sessions::OpCategory cat, const char* name, const std::function<void()>& fn) = 0;
  /// Pooled lookup of n_bags bags (ids[off[i], off[i+1]), off has n_bags + 1 entries, absolute
  /// into ids) in the local shard (table, shard_index) into out (n_bags x the shard's columns),
  /// each bag times scale[i] when scale is not null. Counts the ids, the lookup time and the
  /// bytes out in the shard's load counter. Throws std::logic_error for a shard not on this rank.
  virtual void lookup(int table, int shard_index, const int64_t* ids, const int64_t* off, int64_t n_bags,
                      const float* scale, DeviceBuffer<float>& out) = 0;
  /// The fused row optimizer of the local shard (table, shard_index) at `iteration` with the
  /// sparse gradient g (rows local to the shard); counts g's rows as the shard's unique ids.
  virtual void update(int table, int shard_index, int64_t iteration, const SparseGrad& g) = 0;
  /// Pooled lookup, as lookup(), in this rank's replica of table `table`'s hot rows
  /// (Layout::hot_rows): ids are indices into hot_rows[table]; out is n_bags x embedding_dim.
  /// Throws std::out_of_range for a table without hot rows.
  virtual void replica_lookup(int table, const int64_t* ids, const int64_t* off, int64_t n_bags, const float* scale,
                              DeviceBuffer<float>& out) = 0;
  /// The fused row optimizer on that replica at `iteration` (g's rows: indices into hot_rows[table]).
  virtual void replica_update(int table, int64_t iteration, const SparseGrad& g) = 0;
  /// A factorized local shard (table, shard_index) (low_rank_dim r > 0: A is its rows x r, B is
  /// r x dim): low_rank_backward (kernels/low_rank.h) of the sparse gradient g of its rows, from A
  /// and B before any update: dA (g's rows x r) and dB (r x dim, no rows when g has none).
  /// Counts g's rows as the shard's unique ids, as update() does. Throws std::logic_error for a
  /// shard not on this rank.
  virtual std::pair<SparseGrad, SparseGrad> factor_grads(int table, int shard_index, const SparseGrad& g) = 0;
  /// The fused row optimizer at `iteration` on that shard's A with dA (skipped without rows) and
  /// on its copy of B with dB (skipped without rows).
  virtual void factor_update(int table, int shard_index, int64_t iteration, const SparseGrad& da, const SparseGrad& db) = 0;

  // The output and gradient dists on the rank's device (issue 14; pooled_all_to_all.cpp, and
  // row_wise.cpp / table_row_wise.cpp through pooled_on_device below).
  /// Whether they run on the device: the rank has one (the cuda backend, or the host stand-in),
  /// its dense part is resident there (reads the pooled embeddings from the device and writes
  /// their gradients there), no on_pooled hook reads the pooled embeddings on the host, and the
  /// comms are fp32 (and TrainerOptions::device_dist, a test hook, is not off). The same on
  /// every rank of a run. Then the looked-up rows of those slots
  /// (slot_out) stay in device memory (no copy to the host after the lookup), pooled[f] and
  /// dpooled[f] of their features are the buffers' device memory (the dense part does not scale
  /// dpooled by 1 / W: the gradient dist's packing does) and slot_grad[k] is written there, copied
  /// to the host only for a slot that !slot_grad_on_device.
  virtual bool dist_on_device() const = 0;
  /// With dist_on_device: whether local slot k's gradients are read from device memory by the
  /// embedding backward (its shard accumulates there: fp32 rows and state on the device, not
  /// factorized; Rank::accumulates_on_device); false otherwise.
  virtual bool slot_grad_on_device(size_t local_slot) const = 0;
  /// On the compute thread, device memory of the rank (dist_on_device only; std::logic_error
  /// without a device): `bytes` from src to dst (RankDevice::copy_on_device), asynchronous on a
  /// GPU, in order with the rank's device work.
  virtual void device_copy(void* dst, const void* src, int64_t bytes) = 0;
  /// A 2-D device-to-device copy (RankDevice::copy_2d: rows of width_bytes, pitches in bytes).
  virtual void device_copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes,
                              int64_t rows) = 0;
  /// RankDevice::scale_copy_2d: dst[r * dst_stride + c] = src[r * src_stride + c] * s (floats).
  virtual void device_scale_copy_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                                    int64_t dst_stride, float s) = 0;
  /// Device to host (RankDevice::to_host; returns when the bytes are there), counted with the
  /// embedding update's copies (detail::sparse_grad_copy_totals) in measured steps.
  virtual void device_to_host(void* dst, const void* src, int64_t bytes) = 0;
  // The row_wise / table_row_wise dists on the device (issue 14; row_wise.cpp, table_row_wise.cpp).
  /// Whether feature f's pooled embeddings and their gradients stay in device memory: dist_on_device,
  /// f is served by table_wise / column_wise, row_wise, table_row_wise or grid_shard slots, and its
  /// table has no hot rows (hot_rows.cpp pools and backpropagates them on the host). The same on
  /// every rank; then the lookup leaves those slots' rows on the device (slot_out), the output
  /// dist writes pooled[f]'s device memory and the dense part leaves dpooled[f] there unscaled.
  virtual bool pooled_on_device(int f) const = 0;
  /// Host to device (RankDevice::to_device), in order with the rank's device work (the mean
  /// scales of the row-split dists: B floats a feature, one copy a dist).
  virtual void host_to_device(void* dst, const void* src, int64_t bytes) = 0;
  /// RankDevice::add_scale_rows_2d: dst = ((accumulate ? dst : 0) + src) * row_scale[r] (floats;
  /// row_scale device memory or nullptr).
  virtual void device_add_scale_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                                        int64_t dst_stride, const float* row_scale, bool accumulate) = 0;
  /// RankDevice::scale_copy_rows_2d: dst = (src * s) * row_scale[r] (row_scale nullptr: src * s).
  virtual void device_scale_copy_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                                         int64_t dst_stride, float s, const float* row_scale) = 0;
};

/// The sparse gradient of one local shard, after the gradient dist (rows local to the shard).
struct ShardGrad {
  int table = 0;
  int shard_index = 0;
  SparseGrad g;
};

/// This rank's own batch, before any input dist: F x B bags, feature-major.
struct LocalBatch {
  const int64_t* values = nullptr;   ///< every id of the batch
  const int64_t* offsets = nullptr;  ///< F * B + 1 bag offsets into values
  const int64_t* lengths = nullptr;  ///< F * B bag lengths
  int64_t iteration = 0;             ///< the batch's iteration (warmup included)
};

/// One batch's output dist after its buffers are packed (by the module's first output dist op):
/// its collectives run on the comm thread (queued by the module's output dist ops); finish()
/// on the compute thread once they have returned (the batch's sync point: the executor's
/// finish_output_dist). The executor frees the jobs in the order they were made.
class OutputDistJob {
 public:
  virtual ~OutputDistJob() = default;
  /// Writes the received pooled embeddings into pooled[f] (B x dim of feature f); lengths are
  /// the batch's bag lengths (feature-major, F x B) for mean pooling after a reduction.
  virtual void finish(RankContext& ctx, std::vector<DeviceBuffer<float>>& pooled, const std::vector<int64_t>& lengths) = 0;
};

/// What a module's ops of one batch pass each other (buffers packed by one op and used by a
/// later one); freed when its last op is done, or with the batch state when an op fails.
class ModuleScratch {
 public:
  virtual ~ModuleScratch() = default;
};

/// One batch as the modules' ops see it: the executor's per-batch state (exec/threaded
/// Inflight derives from it). Buffers are fp32 in the rank's arena; W ranks, B samples a rank.
struct ModuleBatch {
  LocalBatch local;                               ///< this rank's own batch (set by the input op)
  const std::vector<int64_t>* lengths = nullptr;  ///< its F x B bag lengths, feature-major
  /// lookup: per local slot k (layout().slots_to[rank]), the W*B x cols rows looked up, source rank major
  std::vector<DeviceBuffer<float>> slot_out;
  std::vector<DeviceBuffer<float>> pooled;   ///< per feature f: B x dim, final after the output dist
  std::vector<DeviceBuffer<float>> dpooled;  ///< per feature f: B x dim, the gradient of pooled (train)
  std::vector<DeviceBuffer<float>> slot_grad;  ///< per local slot: W*B x cols, written by the grad dist
  /// The output dist jobs of the batch, in the order their modules' ops ran (module order).
  std::vector<std::unique_ptr<OutputDistJob>> output_jobs;
  /// Per module: its scratch (nullptr when none) and the gradients of its local shards it
  /// applies itself (EmbeddingSharding::applies_shard_grads; written by backward_fused_optimizer).
  std::vector<std::unique_ptr<ModuleScratch>> scratch;
  std::vector<std::vector<ShardGrad>> shard_grads;
};

class EmbeddingSharding {
 public:
  virtual ~EmbeddingSharding() = default;
  /// Appends the output dist ops of batch `batch` (`sync`: the compute worker waits for them).
  virtual void emit_output_dist(program::ProgramSink& sink, int batch, bool sync) const = 0;
  /// Appends the gradient dist ops (the compute worker waits for each).
  virtual void emit_grad_dist(program::ProgramSink& sink, int batch) const = 0;
  /// Runs op `op` of batch `b` on the compute thread: an op this module emitted (owner `self`,
  /// its index in embedding_shardings; the kind and argument its emit_* tagged it with,
  /// `tag`), in program order. Output dist ops pack the looked-up rows (b.slot_out) and queue
  /// their collectives (RankContext::queue; OutputDistJob in b.output_jobs), grad dist ops
  /// fill b.slot_grad from b.dpooled (the compute worker waits for their collectives), update
  /// ops apply what they own. Throws std::logic_error for a kind it never emits.
  virtual void run(const ProgramOp& op, const program::OpOwner& tag, RankContext& ctx, ModuleBatch& b,
                   int self) const = 0;

  // Tables a module holds outside the slots of the input dist (data_parallel's replicas): by
  // default none.
  /// Expected ids the lookup op of a batch reads from them on the sink's rank, and the device
  /// bytes that reading moves (ProgramSink::lookup_bytes).
  struct LookupWork {
    double ids = 0, bytes = 0;
    double bags = 0;  ///< bags pooled (ProgramOp::work_items of the lookup op)
  };
  virtual LookupWork local_lookup_work(const program::ProgramSink&) const { return {}; }
  /// Appends their update ops, after the local shards' fused optimizer.
  virtual void emit_update(program::ProgramSink&, int /*batch*/) const {}
  /// Their lookups, part of the executor's lookup op, whose pooled result is final here:
  /// writes pooled[f] (B x dim of feature f).
  virtual void local_lookup(RankContext&, const LocalBatch&, std::vector<DeviceBuffer<float>>& /*pooled*/) const {}

  // Local shards whose sparse gradients the module applies itself (its update ops) instead of
  // the executor's fused optimizer (row_wise's factorized tables: B is summed over the ranks
  // first): none by default.
  /// Whether table `table`'s local shards are such.
  virtual bool applies_shard_grads(const detail::Layout&, int /*table*/) const { return false; }
};

/// A module whose tables are held outside the slots of the input dist (data_parallel's replicas,
/// hot_rows' replicated rows): no output or gradient dist; it overrides the local lookup,
/// update ops and their running only.
class LocalEmbeddingSharding : public EmbeddingSharding {
 public:
  void emit_output_dist(program::ProgramSink&, int, bool) const override {}
  void emit_grad_dist(program::ProgramSink&, int) const override {}
};

/// Throws std::logic_error: op `op` was handed to a module (`module`) that does not run its kind.
[[noreturn]] void unknown_op(const char* module, const ProgramOp& op, const program::OpOwner& tag);

/// The modules of a plan, in the order their collectives run: the all-to-all of table_wise and
/// column_wise shards when some rank holds one (every rank joins, with empty splits when it has
/// none), then
/// row_wise when the plan has row-wise tables, then table_row_wise when it has those, then
/// data_parallel when it has replicated tables, then hot_rows when a table has hot rows.
std::vector<std::unique_ptr<EmbeddingSharding>> embedding_shardings(const detail::Layout& layout);

std::unique_ptr<EmbeddingSharding> pooled_all_to_all_sharding();
std::unique_ptr<EmbeddingSharding> row_wise_sharding();
std::unique_ptr<EmbeddingSharding> table_row_wise_sharding();
std::unique_ptr<EmbeddingSharding> data_parallel_sharding();
std::unique_ptr<EmbeddingSharding> hot_rows_sharding();

/// rows[s] *= 1 / lengths[f * B + s] (0 for an empty bag): mean pooling applied after a
/// reduction of sums (row-wise tables); rows is B x dim.
void scale_rows_mean(const std::vector<int64_t>& lengths, int64_t B, int f, float* rows, int64_t dim);
/// Whether feature f's table pools by mean (O(1): the layout's table of each feature).
bool is_mean(const WorkloadSpec& spec, const detail::Layout& layout, int feature);
/// Per-bag scales of mean pooling: 1 / lens[i] (0 for an empty bag), n bags.
std::vector<float> mean_scale(const int64_t* lens, size_t n);

/// The mean scales of the row-split dists on the device: for every feature of `features` that
/// pools by mean (is_mean), its B scales (mean_scale of its bags, as scale_rows_mean's) in one
/// device buffer ("comm_buffer", copied in with one RankContext::host_to_device; empty when no
/// feature pools by mean); at[f] is feature f's first scale in it, -1 for a feature that sums.
struct DeviceMeanScales {
  DeviceBuffer<float> scales;
  std::vector<int64_t> at;  ///< per feature of the spec
  /// Feature f's B scales in device memory, nullptr when it sums.
  const float* of(int f) {
    const int64_t a = at[static_cast<size_t>(f)];
    return a < 0 ? nullptr : scales.device_data() + a;
  }
};
DeviceMeanScales device_mean_scales(RankContext& ctx, const std::vector<int>& features,
                                    const std::vector<int64_t>& lengths);

}  // namespace sharding
}  // namespace embedscope::engine
