// data_parallel: every rank holds a full replica of the table (TorchRec's DP sharding), so the
// lookup is local and needs no dist; the sparse row gradients of every replica are all-gathered
// (counts first, then rows and values), merged in rank order and applied on every replica, so
// the replicas stay identical.
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "program/program_sink.h"
#include "embedscope/engine/program/step_program.h"
#include "embedding_sharding.h"

namespace embedscope::engine::sharding {

namespace {

using sessions::OpCategory;

// the module's op kinds (program_sink.h OpOwner::kind); arg: the replicated table
enum OpKind : int { kBackward, kCounts, kAllGather, kOptimizer };

// One table's gradients from its backward op to its optimizer op; the all-gathered rows and
// values freed values first (as locals of one function were).
struct Scratch final : ModuleScratch {
  SparseGrad local;
  std::vector<int64_t> n_rows;
  DeviceBuffer<int64_t> all_rows;
  DeviceBuffer<float> all_vals;
  ~Scratch() override { all_vals = {}; all_rows = {}; }
};

class DataParallel final : public LocalEmbeddingSharding {
 public:
  LookupWork local_lookup_work(const program::ProgramSink& sink) const override {
    LookupWork w;
    for (int t : sink.layout.dp_tables) {
      const double n = replica_ids(sink, t);
      const TableSpec& ts = sink.spec.tables[static_cast<size_t>(t)];
      w.ids += n;
      w.bytes += program::ProgramSink::lookup_bytes(n, ts, ts.embedding_dim, bags(sink, t));
      w.bags += bags(sink, t);
    }
    return w;
  }

  void emit_update(program::ProgramSink& sink, int batch) const override {
    for (int t : sink.layout.dp_tables) {
      const TableSpec& ts = sink.spec.tables[static_cast<size_t>(t)];
      const double n_ids = replica_ids(sink, t);
      // distinct rows among n uniform ids over N rows: N (1 - (1 - 1/N)^n)
      const double N = static_cast<double>(ts.rows());
      const int64_t rows = std::llround(N * (1.0 - std::pow(1.0 - 1.0 / N, n_ids)));
      const auto& world = sink.world_ranks;
      const auto W = static_cast<size_t>(sink.world);
      const double bag_bytes = bags(sink, t) * 4.0 * static_cast<double>(ts.embedding_dim);
      sink.own(sink.compute("backward_data_parallel", OpCategory::optimizer, batch,
                   fmt::format("sparse row gradients of data-parallel table {}", ts.name), std::llround(n_ids), 0,
                   std::llround(bag_bytes + n_ids * (8.0 + 4.0 * static_cast<double>(ts.embedding_dim)))),
               kBackward, t);
      std::vector<int64_t> one(W, 1), n_rows(W, rows), vals(W, rows * ts.embedding_dim);
      sink.own(sink.comm("grad_dist/data_parallel_counts", batch,
                {sink.all_gather("grad_dist/data_parallel_counts", world, "world", one, 8, "int64")}, true,
                "all-gather of each replica's gradient row count"),
               kCounts, t);
      sink.own(sink.comm("grad_dist/data_parallel_all_gather", batch,
                {sink.all_gather("grad_dist/data_parallel_rows", world, "world", n_rows, 8, "int64", false),
                 sink.all_gather("grad_dist/data_parallel_values", world, "world", vals, 4, "float32", false)},
                true, "all-gather of every replica's gradient rows and values"),
               kAllGather, t);
      sink.own(sink.compute("optimizer_data_parallel", OpCategory::optimizer, batch,
                   fmt::format("merge the replicas' gradients and update every replica of {}", ts.name),
                   sink.world * rows, 0,
                   std::llround(program::ProgramSink::update_bytes(static_cast<double>(sink.world * rows), ts,
                                                                   ts.embedding_dim, 0, sink.spec.optimizer.type))),
               kOptimizer, t);
    }
  }

  void local_lookup(RankContext& ctx, const LocalBatch& b, std::vector<DeviceBuffer<float>>& pooled) const override {
    const WorkloadSpec& spec = ctx.spec();
    const int64_t B = ctx.layout().B;
    for (int t : ctx.layout().dp_tables)
      for (const int f : ctx.layout().table_features[static_cast<size_t>(t)]) {
        std::vector<float> sc;
        if (is_mean(spec, ctx.layout(), f)) sc = mean_scale(b.lengths + f * B, static_cast<size_t>(B));
        ctx.lookup(t, ctx.rank(), b.values, b.offsets + f * B, B, sc.empty() ? nullptr : sc.data(),
                   pooled[static_cast<size_t>(f)]);
      }
  }

  /// The update of each replicated table t (emit_update's ops, in dp_tables order): its sparse
  /// gradient from this rank's bags (kBackward), the replicas' row counts (kCounts) and rows and
  /// values (kAllGather) all-gathered, merged in rank order and applied on this replica (kOptimizer).
  void run(const ProgramOp& op, const program::OpOwner& tag, RankContext& ctx, ModuleBatch& mb, int self) const override {
    const WorkloadSpec& spec = ctx.spec();
    const LocalBatch& b = mb.local;
    const int64_t B = ctx.layout().B;
    const int W = ctx.layout().world;
    const int t = tag.arg;
    const int64_t dim = spec.tables[static_cast<size_t>(t)].embedding_dim;
    auto& scratch = mb.scratch[static_cast<size_t>(self)];
    switch (tag.kind) {
      case kBackward: {
        auto s = std::make_unique<Scratch>();
        ctx.compute(OpCategory::optimizer, "backward_data_parallel", [&] {
          std::vector<SparseGrad> parts;
          for (const int f : ctx.layout().table_features[static_cast<size_t>(t)]) {
            std::vector<float> sc;
            if (is_mean(spec, ctx.layout(), f)) sc = mean_scale(b.lengths + f * B, static_cast<size_t>(B));
            parts.push_back(accumulate_sparse_grad(dim, b.values, b.offsets + f * B, B, sc.empty() ? nullptr : sc.data(),
                                                   mb.dpooled[static_cast<size_t>(f)].data(), dim));
          }
          s->local = parts.size() == 1 ? std::move(parts[0]) : merge_sparse_grads(parts, dim);
        });
        scratch = std::move(s);
        return;
      }
      case kCounts: {
        auto& s = static_cast<Scratch&>(*scratch);
        std::vector<int64_t> one(static_cast<size_t>(W), 1);
        s.n_rows.assign(static_cast<size_t>(W), 0);
        const int64_t mine_rows = static_cast<int64_t>(s.local.rows.size());
        detail::Collectives& world = ctx.group(GroupKind::world);
        ctx.comm(GroupKind::world, "grad_dist/data_parallel_counts", [&] {
          world.all_gather_v("grad_dist/data_parallel_counts", &mine_rows, s.n_rows.data(), one, sizeof(int64_t));
        });
        return;
      }
      case kAllGather: {
        auto& s = static_cast<Scratch&>(*scratch);
        const int64_t total_rows = std::accumulate(s.n_rows.begin(), s.n_rows.end(), int64_t{0});
        s.all_rows = ctx.index_buffer("comm_buffer", static_cast<size_t>(total_rows));
        s.all_vals = ctx.buffer("comm_buffer", static_cast<size_t>(total_rows * dim));
        std::vector<int64_t> val_counts(static_cast<size_t>(W));
        for (int r = 0; r < W; ++r) val_counts[static_cast<size_t>(r)] = s.n_rows[static_cast<size_t>(r)] * dim;
        detail::Collectives& world = ctx.group(GroupKind::world);
        ctx.comm(GroupKind::world, "grad_dist/data_parallel_all_gather", [&] {
          world.all_gather_v("grad_dist/data_parallel_rows", s.local.rows.data(), s.all_rows.data(), s.n_rows,
                             sizeof(int64_t));
          world.all_gather_v("grad_dist/data_parallel_values", s.local.values.data(), s.all_vals.data(), val_counts,
                             sizeof(float));
        });
        return;
      }
      case kOptimizer: {
        auto& s = static_cast<Scratch&>(*scratch);
        ctx.compute(OpCategory::optimizer, "optimizer_data_parallel", [&] {
          std::vector<SparseGrad> parts(static_cast<size_t>(W));
          int64_t at = 0;
          for (int r = 0; r < W; ++r) {
            auto& pr = parts[static_cast<size_t>(r)];
            pr.dim = dim;
            const int64_t n = s.n_rows[static_cast<size_t>(r)];
            pr.rows.assign(s.all_rows.data() + at, s.all_rows.data() + at + n);
            pr.values.assign(s.all_vals.data() + at * dim, s.all_vals.data() + (at + n) * dim);
            at += n;
          }
          ctx.update(t, ctx.rank(), b.iteration + 1, merge_sparse_grads(parts, dim));
        });
        scratch.reset();
        return;
      }
      default: unknown_op("data_parallel", op, tag);
    }
  }

 private:
  // Expected ids of this rank's batch in a replicated table's features.
  static double replica_ids(const program::ProgramSink& sink, int t) {
    double n = 0;
    for (const int f : sink.layout.table_features[static_cast<size_t>(t)])
      n += static_cast<double>(sink.B) * sink.spec.features[static_cast<size_t>(f)].pooling_factor.mean;
    return n;
  }
  // Bags the lookup of table t pools into on one rank: B per feature it serves.
  static double bags(const program::ProgramSink& sink, int t) {
    return static_cast<double>(sink.B) * static_cast<double>(sink.layout.table_features[static_cast<size_t>(t)].size());
  }
};

}  // namespace

std::unique_ptr<EmbeddingSharding> data_parallel_sharding() { return std::make_unique<DataParallel>(); }

}  // namespace embedscope::engine::sharding
