#pragma once
// One sharding type's part of a step, behind one interface (TorchRec's EmbeddingSharding: the
// output dist of the pooled embeddings and, in reverse, the gradient dist). Each module emits
// its ops into the step program (program/program_sink.h) and, when an executor runs them,
// packs, sends and unpacks its buffers through the rank's RankContext. The executors hold the
// modules a plan needs (embedding_shardings) and never name a sharding type.
//   pooled_all_to_all.cpp  table_wise and column_wise: all-to-all of B x cols blocks
//   row_wise.cpp           row_wise: reduce-scatter of partial sums / all-gather of gradients
//   table_row_wise.cpp     table_row_wise: reduce-scatter in the node, all-to-all across nodes
//   data_parallel.cpp      data_parallel: no dist; local lookups on every replica, sparse
//                          gradients all-gathered and applied on every replica
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
namespace program {
class ProgramSink;
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

/// One batch's output dist after its buffers are packed: run() on the comm thread, finish() on
/// the compute thread once run() has returned.
class OutputDistJob {
 public:
  virtual ~OutputDistJob() = default;
  virtual void run(RankContext& ctx) = 0;
  /// Writes the received pooled embeddings into pooled[f] (B x dim of feature f); lengths are
  /// the batch's bag lengths (feature-major, F x B) for mean pooling after a reduction.
  virtual void finish(RankContext& ctx, std::vector<DeviceBuffer<float>>& pooled, const std::vector<int64_t>& lengths) = 0;
};

class EmbeddingSharding {
 public:
  virtual ~EmbeddingSharding() = default;
  /// Appends the output dist ops of batch `batch` (`sync`: the compute worker waits for them).
  virtual void emit_output_dist(program::ProgramSink& sink, int batch, bool sync) const = 0;
  /// Appends the gradient dist ops (the compute worker waits for each).
  virtual void emit_grad_dist(program::ProgramSink& sink, int batch) const = 0;
  /// Packs the looked-up rows of this rank's slots (slot_out[k]: W*B x cols of local slot k,
  /// source rank major) for the output dist; nullptr when the module has none.
  virtual std::unique_ptr<OutputDistJob> start_output_dist(RankContext& ctx,
                                                           const std::vector<DeviceBuffer<float>>& slot_out) const = 0;
  /// The gradient dist: dpooled[f] (B x dim) to the shards; writes slot_grad[k] (W*B x cols of
  /// local slot k, source rank major).
  virtual void grad_dist(RankContext& ctx, const std::vector<DeviceBuffer<float>>& dpooled,
                         const std::vector<int64_t>& lengths, std::vector<DeviceBuffer<float>>& slot_grad) const = 0;

  // Tables a module holds outside the slots of the input dist (data_parallel's replicas): by
  // default none.
  /// Expected ids the lookup op of a batch reads from them on the sink's rank, and the device
  /// bytes that reading moves (ProgramSink::lookup_bytes).
  struct LookupWork {
    double ids = 0, bytes = 0;
  };
  virtual LookupWork local_lookup_work(const program::ProgramSink&) const { return {}; }
  /// Appends their update ops, after the local shards' fused optimizer.
  virtual void emit_update(program::ProgramSink&, int /*batch*/) const {}
  /// Their lookups, whose pooled result is final here: writes pooled[f] (B x dim of feature f).
  virtual void local_lookup(RankContext&, const LocalBatch&, std::vector<DeviceBuffer<float>>& /*pooled*/) const {}
  /// Their update from dpooled[f] (B x dim, the gradient of this rank's pooled outputs).
  virtual void update(RankContext&, const LocalBatch&, const std::vector<DeviceBuffer<float>>& /*dpooled*/) const {}

  // Local shards whose sparse gradients the module applies itself instead of the executor's
  // fused optimizer (row_wise's factorized tables: B is summed over the ranks first): none by default.
  /// Whether table `table`'s local shards are such.
  virtual bool applies_shard_grads(const detail::Layout&, int /*table*/) const { return false; }
  /// Applies them at `iteration`, after the other local shards' fused optimizer and before
  /// update(): `grads` holds this rank's shards of those tables, in shard order (none when the
  /// rank holds none; it still joins the module's collectives).
  virtual void update_shards(RankContext&, std::vector<ShardGrad>& /*grads*/, int64_t /*iteration*/) const {}
};

/// A module whose tables are held outside the slots of the input dist (data_parallel's replicas,
/// hot_rows' replicated rows): no output or gradient dist; it overrides the local lookup,
/// update and their ops only.
class LocalEmbeddingSharding : public EmbeddingSharding {
 public:
  void emit_output_dist(program::ProgramSink&, int, bool) const override {}
  void emit_grad_dist(program::ProgramSink&, int) const override {}
  std::unique_ptr<OutputDistJob> start_output_dist(RankContext&, const std::vector<DeviceBuffer<float>>&) const override {
    return nullptr;
  }
  void grad_dist(RankContext&, const std::vector<DeviceBuffer<float>>&, const std::vector<int64_t>&,
                 std::vector<DeviceBuffer<float>>&) const override {}
};

/// The modules of a plan, in the order their collectives run: the all-to-all of table_wise and
/// column_wise shards always (every rank joins, with empty splits when it has none), then
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

}  // namespace sharding
}  // namespace embedscope::engine
