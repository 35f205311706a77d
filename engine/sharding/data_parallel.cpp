// data_parallel: every rank holds a full replica of the table (TorchRec's DP sharding), so the
// lookup is local and needs no dist; the sparse row gradients of every replica are all-gathered
// (counts first, then rows and values), merged in rank order and applied on every replica, so
// the replicas stay identical.
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "program/program_sink.h"
#include "embedding_sharding.h"

namespace embedscope::engine::sharding {

namespace {

using sessions::OpCategory;

class DataParallel final : public LocalEmbeddingSharding {
 public:
  LookupWork local_lookup_work(const program::ProgramSink& sink) const override {
    LookupWork w;
    for (int t : sink.layout.dp_tables) {
      const double n = replica_ids(sink, t);
      const TableSpec& ts = sink.spec.tables[static_cast<size_t>(t)];
      w.ids += n;
      w.bytes += program::ProgramSink::lookup_bytes(n, ts, ts.embedding_dim, bags(sink, t));
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
      sink.compute("backward_data_parallel", OpCategory::optimizer, batch,
                   fmt::format("sparse row gradients of data-parallel table {}", ts.name), std::llround(n_ids), 0,
                   std::llround(bag_bytes + n_ids * (8.0 + 4.0 * static_cast<double>(ts.embedding_dim))));
      std::vector<int64_t> one(W, 1), n_rows(W, rows), vals(W, rows * ts.embedding_dim);
      sink.comm("grad_dist/data_parallel_counts", batch,
                {sink.all_gather("grad_dist/data_parallel_counts", world, "world", one, 8, "int64")}, true,
                "all-gather of each replica's gradient row count");
      sink.comm("grad_dist/data_parallel_all_gather", batch,
                {sink.all_gather("grad_dist/data_parallel_rows", world, "world", n_rows, 8, "int64", false),
                 sink.all_gather("grad_dist/data_parallel_values", world, "world", vals, 4, "float32", false)},
                true, "all-gather of every replica's gradient rows and values");
      sink.compute("optimizer_data_parallel", OpCategory::optimizer, batch,
                   fmt::format("merge the replicas' gradients and update every replica of {}", ts.name),
                   sink.world * rows, 0,
                   std::llround(program::ProgramSink::update_bytes(static_cast<double>(sink.world * rows), ts,
                                                                   ts.embedding_dim, 0, sink.spec.optimizer.type)));
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

  void update(RankContext& ctx, const LocalBatch& b, const std::vector<DeviceBuffer<float>>& dpooled) const override {
    const WorkloadSpec& spec = ctx.spec();
    const int64_t B = ctx.layout().B;
    const int W = ctx.layout().world;
    for (int t : ctx.layout().dp_tables) {
      const int64_t dim = spec.tables[static_cast<size_t>(t)].embedding_dim;
      SparseGrad local;
      ctx.compute(OpCategory::optimizer, "backward_data_parallel", [&] {
        std::vector<SparseGrad> parts;
        for (const int f : ctx.layout().table_features[static_cast<size_t>(t)]) {
          std::vector<float> sc;
          if (is_mean(spec, ctx.layout(), f)) sc = mean_scale(b.lengths + f * B, static_cast<size_t>(B));
          parts.push_back(accumulate_sparse_grad(dim, b.values, b.offsets + f * B, B, sc.empty() ? nullptr : sc.data(),
                                                 dpooled[static_cast<size_t>(f)].data(), dim));
        }
        local = parts.size() == 1 ? std::move(parts[0]) : merge_sparse_grads(parts, dim);
      });
      std::vector<int64_t> n_rows(static_cast<size_t>(W)), one(static_cast<size_t>(W), 1);
      const int64_t mine_rows = static_cast<int64_t>(local.rows.size());
      detail::Collectives& world = ctx.group(GroupKind::world);
      ctx.comm(GroupKind::world, "grad_dist/data_parallel_counts", [&] {
        world.all_gather_v("grad_dist/data_parallel_counts", &mine_rows, n_rows.data(), one, sizeof(int64_t));
      });
      const int64_t total_rows = std::accumulate(n_rows.begin(), n_rows.end(), int64_t{0});
      auto all_rows = ctx.index_buffer("comm_buffer", static_cast<size_t>(total_rows));
      auto all_vals = ctx.buffer("comm_buffer", static_cast<size_t>(total_rows * dim));
      std::vector<int64_t> val_counts(static_cast<size_t>(W));
      for (int r = 0; r < W; ++r) val_counts[static_cast<size_t>(r)] = n_rows[static_cast<size_t>(r)] * dim;
      ctx.comm(GroupKind::world, "grad_dist/data_parallel_all_gather", [&] {
        world.all_gather_v("grad_dist/data_parallel_rows", local.rows.data(), all_rows.data(), n_rows, sizeof(int64_t));
        world.all_gather_v("grad_dist/data_parallel_values", local.values.data(), all_vals.data(), val_counts,
                           sizeof(float));
      });
      ctx.compute(OpCategory::optimizer, "optimizer_data_parallel", [&] {
        std::vector<SparseGrad> parts(static_cast<size_t>(W));
        int64_t at = 0;
        for (int r = 0; r < W; ++r) {
          auto& pr = parts[static_cast<size_t>(r)];
          pr.dim = dim;
          const int64_t n = n_rows[static_cast<size_t>(r)];
          pr.rows.assign(all_rows.data() + at, all_rows.data() + at + n);
          pr.values.assign(all_vals.data() + at * dim, all_vals.data() + (at + n) * dim);
          at += n;
        }
        ctx.update(t, ctx.rank(), b.iteration + 1, merge_sparse_grads(parts, dim));
      });
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
