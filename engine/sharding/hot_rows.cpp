// Hot-row replication (issue 17; HugeCTR's hybrid embedding, which trains its "frequent"
// categories data-parallel and the rest model-parallel): the rows of a table split by rows
// (row_wise, table_row_wise, grid_shard) listed in
// TableSharding::hot_rows are held by every rank in a replica (RankContext::replica_lookup /
// replica_update), and the input dist sends none of their ids (threaded/rank_input.cpp drops
// them before bucketizing). So, per step and per hot table with H hot rows of dim columns:
//  - forward: each rank pools its own batch's hot ids from its replica into pooled[f] as plain
//    sums (full rows); the row-split output dists then add the reduced partial sums of the cold
//    ids (each column block into its columns) and divide by the full bag length for mean pooling
//    (row_wise.cpp, table_row_wise.cpp), so the pooled output is the table's;
//  - backward: each rank accumulates its bags' gradients (dpooled, times 1 / full bag length for
//    mean pooling) into a dense H x (dim + 1) block, the last column counting the ids of each
//    row; one all-reduce (sum) over the world, of every hot table's block at once, makes the
//    blocks the global batch's on every rank (H (dim + 1) fp32 values a table, the cost
//    choose_hot_rows weighs, rebalance/hot_rows.h); every rank
//    then applies the table's fused optimizer to the rows with a non-zero count (the rows the
//    step touched, as the sparse update of the model-parallel path does: a row no id touched
//    keeps its weights and optimizer state), so the replicas stay identical.
// The model-parallel shards' copies of the hot rows are never read nor updated; the run's tables
// take the hot rows from the replica (threaded/executor.cpp).
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "program/program_sink.h"
#include "embedscope/engine/program/step_program.h"
#include "embedding_sharding.h"

namespace embedscope::engine::sharding {

namespace {

using sessions::OpCategory;

// the module's op kinds (program_sink.h OpOwner::kind); kOptimizer's arg: the index in hot_tables
enum OpKind : int { kBackward, kAllReduce, kOptimizer };

// Every hot table's H x (dim + 1) block, in hot_tables order, from the backward op to the
// last table's optimizer op.
struct Scratch final : ModuleScratch {
  std::vector<int64_t> at;  // block offsets, hot_tables.size() + 1
  DeviceBuffer<float> block;
};

class HotRows final : public LocalEmbeddingSharding {
 public:
  LookupWork local_lookup_work(const program::ProgramSink& sink) const override {
    LookupWork w;
    for (int t : sink.layout.hot_tables) {
      const TableSpec& ts = sink.spec.tables[static_cast<size_t>(t)];
      const double n = hot_ids(sink, t);
      w.ids += n;
      w.bytes += program::ProgramSink::lookup_bytes(n, ts, ts.embedding_dim, bags(sink, t));
      w.bags += bags(sink, t);
    }
    return w;
  }

  void emit_update(program::ProgramSink& sink, int batch) const override {
    // one backward op and one all-reduce for every hot table's block (fused: one collective's
    // latency a step, not one a table), then each table's optimizer
    double ids = 0, bytes = 0;
    int64_t count = 0;
    for (int t : sink.layout.hot_tables) {
      const TableSpec& ts = sink.spec.tables[static_cast<size_t>(t)];
      const auto H = static_cast<int64_t>(sink.layout.hot_rows[static_cast<size_t>(t)].size());
      const double n_ids = hot_ids(sink, t);
      ids += n_ids;
      // read: the bags' gradients and the hot ids; written: the H x (dim + 1) block
      bytes += bags(sink, t) * 4.0 * static_cast<double>(ts.embedding_dim) + n_ids * 8.0 +
               static_cast<double>(H * (ts.embedding_dim + 1)) * 4.0;
      count += H * (ts.embedding_dim + 1);
    }
    sink.own(sink.compute("backward_hot_rows", OpCategory::optimizer, batch,
                 fmt::format("gradients of the hot rows of {} table(s) into one block of rows x (dim + 1)",
                             sink.layout.hot_tables.size()),
                 std::llround(ids), 0, std::llround(bytes)),
             kBackward);
    sink.own(sink.comm("grad_dist/hot_rows_all_reduce", batch,
              {sink.all_reduce("grad_dist/hot_rows_all_reduce", sink.world_ranks, "world", count, 4, "float32")}, true,
              fmt::format("all-reduce of the hot rows' gradients and id counts ({} fp32 values)", count)),
             kAllReduce);
    for (size_t i = 0; i < sink.layout.hot_tables.size(); ++i) {
      const int t = sink.layout.hot_tables[i];
      const TableSpec& ts = sink.spec.tables[static_cast<size_t>(t)];
      const auto H = static_cast<int64_t>(sink.layout.hot_rows[static_cast<size_t>(t)].size());
      sink.own(sink.compute("optimizer_hot_rows", OpCategory::optimizer, batch,
                   fmt::format("fused optimizer on every replica of the {} hot rows of {}", H, ts.name), H, 0,
                   std::llround(program::ProgramSink::update_bytes(static_cast<double>(H), ts, ts.embedding_dim, 0,
                                                                   sink.spec.optimizer.type))),
               kOptimizer, static_cast<int>(i));
    }
  }

  void local_lookup(RankContext& ctx, const LocalBatch& b, std::vector<DeviceBuffer<float>>& pooled) const override {
    const detail::Layout& L = ctx.layout();
    for (int t : L.hot_tables)
      for (const int f : L.table_features[static_cast<size_t>(t)]) {
        std::vector<int64_t> ids, off;
        hot_bags(L, t, b, f, ids, off);
        // plain sums: the row-split output dist adds the cold partial sums, then scales for mean
        ctx.replica_lookup(t, ids.data(), off.data(), L.B, nullptr, pooled[static_cast<size_t>(f)]);
      }
  }

  /// The update (emit_update's ops): every hot table's block of this rank's gradients
  /// (kBackward), all-reduced over the world (kAllReduce), then each table's fused optimizer on
  /// the rows the global batch touched (kOptimizer, per table in hot_tables order).
  void run(const ProgramOp& op, const program::OpOwner& tag, RankContext& ctx, ModuleBatch& mb, int self) const override {
    const WorkloadSpec& spec = ctx.spec();
    const detail::Layout& L = ctx.layout();
    const LocalBatch& b = mb.local;
    const int64_t B = L.B;
    auto& scratch = mb.scratch[static_cast<size_t>(self)];
    switch (tag.kind) {
      case kBackward: {
        auto fresh = std::make_unique<Scratch>();
        std::vector<int64_t>& at = fresh->at;
        at.assign(L.hot_tables.size() + 1, 0);
        for (size_t i = 0; i < L.hot_tables.size(); ++i) {
          const int t = L.hot_tables[i];
          at[i + 1] = at[i] + static_cast<int64_t>(L.hot_rows[static_cast<size_t>(t)].size()) *
                                  (spec.tables[static_cast<size_t>(t)].embedding_dim + 1);
        }
        fresh->block = ctx.buffer("comm_buffer", static_cast<size_t>(at.back()));
        DeviceBuffer<float>& block = fresh->block;
        ctx.compute(OpCategory::optimizer, "backward_hot_rows", [&] {
          std::fill(block.data(), block.data() + at.back(), 0.0f);
          for (size_t i = 0; i < L.hot_tables.size(); ++i) {
            const int t = L.hot_tables[i];
            const int64_t dim = spec.tables[static_cast<size_t>(t)].embedding_dim, w = dim + 1;
            for (const int f : L.table_features[static_cast<size_t>(t)]) {
              const bool mean = is_mean(spec, L, f);
              std::vector<int64_t> ids, off;
              hot_bags(L, t, b, f, ids, off);
              const float* g = mb.dpooled[static_cast<size_t>(f)].data();
              for (int64_t s = 0; s < B; ++s) {
                const int64_t len = b.lengths[f * B + s];
                const float sc = !mean ? 1.0f : len > 0 ? 1.0f / static_cast<float>(len) : 0.0f;
                for (int64_t k = off[static_cast<size_t>(s)]; k < off[static_cast<size_t>(s) + 1]; ++k) {
                  float* row = block.data() + at[i] + ids[static_cast<size_t>(k)] * w;
                  for (int64_t c = 0; c < dim; ++c) row[c] += sc * g[s * dim + c];
                  row[dim] += 1.0f;  // ids of the row (exact in fp32 below 2^24)
                }
              }
            }
          }
        });
        scratch = std::move(fresh);
        return;
      }
      case kAllReduce: {
        auto& s = static_cast<Scratch&>(*scratch);
        ctx.comm(GroupKind::world, "grad_dist/hot_rows_all_reduce", [&] {
          ctx.group(GroupKind::world).all_reduce_sum("grad_dist/hot_rows_all_reduce", s.block.data(), s.at.back());
        });
        return;
      }
      case kOptimizer: {
        auto& s = static_cast<Scratch&>(*scratch);
        const auto i = static_cast<size_t>(tag.arg);
        const int t = L.hot_tables[i];
        const int64_t dim = spec.tables[static_cast<size_t>(t)].embedding_dim, w = dim + 1;
        const auto H = static_cast<int64_t>(L.hot_rows[static_cast<size_t>(t)].size());
        ctx.compute(OpCategory::optimizer, "optimizer_hot_rows", [&] {
          SparseGrad g;
          g.dim = dim;
          for (int64_t h = 0; h < H; ++h) {
            const float* row = s.block.data() + s.at[i] + h * w;
            if (row[dim] == 0.0f) continue;  // no id of the global batch touched it
            g.rows.push_back(h);
            g.values.insert(g.values.end(), row, row + dim);
          }
          ctx.replica_update(t, b.iteration + 1, g);
        });
        if (i + 1 == L.hot_tables.size()) scratch.reset();  // the block, after the last table
        return;
      }
      default: unknown_op("hot_rows", op, tag);
    }
  }

 private:
  // The hot ids of feature f's B bags in this rank's batch, as indices into L.hot_rows[t], with
  // their B + 1 offsets (from 0).
  static void hot_bags(const detail::Layout& L, int t, const LocalBatch& b, int f, std::vector<int64_t>& ids,
                       std::vector<int64_t>& off) {
    const int64_t B = L.B;
    off.assign(static_cast<size_t>(B) + 1, 0);
    for (int64_t s = 0; s < B; ++s) {
      for (int64_t i = b.offsets[f * B + s]; i < b.offsets[f * B + s + 1]; ++i) {
        const int64_t h = L.hot_index(t, b.values[i]);
        if (h >= 0) ids.push_back(h);
      }
      off[static_cast<size_t>(s) + 1] = static_cast<int64_t>(ids.size());
    }
  }
  // Expected hot ids of this rank's batch in table t's features (program_sink.h hot_id_share).
  static double hot_ids(const program::ProgramSink& sink, int t) {
    const int64_t rows = sink.spec.tables[static_cast<size_t>(t)].rows();
    double n = 0;
    for (const int f : sink.layout.table_features[static_cast<size_t>(t)])
      n += static_cast<double>(sink.B) * sink.spec.features[static_cast<size_t>(f)].pooling_factor.mean *
           program::hot_id_share(sink.spec, t, f, 0, rows);
    return n;
  }
  // Bags the hot lookup of table t pools into on one rank: B per feature it serves.
  static double bags(const program::ProgramSink& sink, int t) {
    return static_cast<double>(sink.B) * static_cast<double>(sink.layout.table_features[static_cast<size_t>(t)].size());
  }
};

}  // namespace

std::unique_ptr<EmbeddingSharding> hot_rows_sharding() { return std::make_unique<HotRows>(); }

}  // namespace embedscope::engine::sharding
