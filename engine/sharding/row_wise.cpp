// row_wise: each rank holds a row range of the table, so its pooled rows are partial sums over
// the ids that fell in its range: a reduce-scatter over the world sums them and gives each rank
// its samples' bags (mean pooling divides after the sum); every shard needs every sample's
// gradient, so the gradients are all-gathered.
// On a rank whose dists run on the device (RankContext::pooled_on_device of the row-wise
// features; issue 14) the same values move in device memory: the looked-up partial sums packed
// with device-to-device copies, the reduce-scatter on device pointers
// (Collectives::reduce_scatter_device), the sums unpacked into pooled[f]'s device memory with the
// mean scaling (RankContext::device_add_scale_rows_2d, kernels/dist_pack_core.h); backward,
// dpooled's device memory packed with 1 / W and the mean scale fused in
// (device_scale_copy_rows_2d), the all-gather on device pointers and the blocks copied into
// slot_grad's device memory (to the host for a slot whose shard accumulates there: a factorized
// table's). All or none of the module's features are on the device (a feature of a table with
// hot rows keeps the whole module on the host path: hot_rows.cpp writes pooled[f] and reads
// dpooled[f] on the host).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "program/program_sink.h"
#include "embedscope/engine/program/step_program.h"
#include "embedding_sharding.h"

namespace embedscope::engine::sharding {

namespace {

using detail::Layout;
using sessions::OpCategory;

class Job final : public OutputDistJob {
 public:
  DeviceBuffer<float> send, recv;
  // the buffers go back to the allocator in the order they were taken (as the step always freed them)
  ~Job() override { send = {}; recv = {}; }
  std::vector<int64_t> counts;
  bool on_device = false;  // send and recv are device memory (on_device(ctx))
  // on the comm thread
  void run(RankContext& ctx) {
    const CommPrecision prec = ctx.spec().qcomms.forward_precision;
    ctx.on_comm_lane(GroupKind::world, "output_dist/reduce_scatter", [&] {
      if (on_device)  // fp32 (dist_on_device)
        ctx.group(GroupKind::world)
            .reduce_scatter_device("output_dist/reduce_scatter", send.device_data(), counts, recv.device_data());
      else
        ctx.group(GroupKind::world)
            .reduce_scatter_q("output_dist/reduce_scatter", send.data(), counts, recv.data(), prec, ctx.forward_error());
    });
  }
  void finish(RankContext& ctx, std::vector<DeviceBuffer<float>>& pooled, const std::vector<int64_t>& lengths) override {
    const Layout& L = ctx.layout();
    size_t p = 0;
    if (on_device) {  // (0 + sums) * mean scale into pooled's device memory (no hot rows: nothing there)
      DeviceMeanScales sc = device_mean_scales(ctx, L.rw_features, lengths);
      for (int f : L.rw_features) {
        const int64_t dim = L.dim[static_cast<size_t>(f)];
        ctx.device_add_scale_rows_2d(L.B, dim, recv.device_data() + p, dim, pooled[static_cast<size_t>(f)].device_data(),
                                     dim, sc.of(f), false);
        p += static_cast<size_t>(L.B * dim);
      }
      return;
    }
    for (int f : L.rw_features) {
      const int64_t dim = L.dim[static_cast<size_t>(f)];
      // added: pooled[f] holds the sums of the bags' hot rows (hot_rows.cpp), zeros without any
      float* out = pooled[static_cast<size_t>(f)].data();
      const float* in = recv.data() + p;
      for (int64_t i = 0; i < L.B * dim; ++i) out[i] += in[i];
      if (is_mean(ctx.spec(), ctx.layout(), f)) scale_rows_mean(lengths, L.B, f, pooled[static_cast<size_t>(f)].data(), dim);
      p += static_cast<size_t>(L.B * dim);
    }
  }
};

// the module's op kinds (program_sink.h OpOwner::kind); arg: the factorized table
enum OpKind : int { kOutputDist, kGradDist, kLowRankBAllReduce, kLowRankUpdate };

// A factorized table's dA and summed dB, from its all-reduce op to its update op.
struct LowRankScratch final : ModuleScratch {
  SparseGrad da;
  std::vector<float> db;  // r x dim, then the row count
};

// Whether this rank's row-wise dists run on its device: every row-wise feature's pooled output
// stays there (the same on every rank).
bool on_device(const RankContext& ctx) {
  const auto& fs = ctx.layout().rw_features;
  return !fs.empty() && std::all_of(fs.begin(), fs.end(), [&](int f) { return ctx.pooled_on_device(f); });
}

class RowWise final : public EmbeddingSharding {
 public:
  void emit_output_dist(program::ProgramSink& sink, int batch, bool sync) const override {
    const CommPrecision prec = sink.spec.qcomms.forward_precision;
    const int64_t width = sink.layout.sum_dims(sink.layout.rw_features);
    sink.own(sink.comm("output_dist/reduce_scatter", batch,
              {sink.reduce_scatter("output_dist/reduce_scatter", sink.world_ranks, "world",
                                   std::vector<int64_t>(static_cast<size_t>(sink.world), sink.B * width),
                                   program::ProgramSink::elem_bytes(prec), program::ProgramSink::dtype(prec))},
              sync, "reduce-scatter of the row-wise shards' partial sums (each rank gets its samples' sums)"),
             kOutputDist);
  }
  void emit_grad_dist(program::ProgramSink& sink, int batch) const override {
    const CommPrecision prec = sink.spec.qcomms.backward_precision;
    const int64_t width = sink.layout.sum_dims(sink.layout.rw_features);
    sink.own(sink.comm("grad_dist/all_gather", batch,
              {sink.all_gather("grad_dist/all_gather", sink.world_ranks, "world",
                               std::vector<int64_t>(static_cast<size_t>(sink.world), sink.B * width),
                               program::ProgramSink::elem_bytes(prec), program::ProgramSink::dtype(prec))},
              true, "all-gather of the row-wise gradients (every shard needs every sample's)"),
             kGradDist);
  }
  /// A factorized row_wise table (low_rank_dim r): each rank's dB = A_rows^T g of its rows, summed
  /// over the ranks (r x dim, and the rows the ranks updated: B moves when any rank has a row,
  /// as the unsharded table's does), then every copy of B takes the same update.
  void emit_update(program::ProgramSink& sink, int batch) const override {
    for (int t : sink.layout.low_rank_rw_tables) {
      const TableSpec& ts = sink.spec.tables[static_cast<size_t>(t)];
      const int64_t n = ts.low_rank_dim * ts.embedding_dim + 1;
      sink.own(sink.comm("grad_dist/low_rank_b_all_reduce", batch,
                {sink.all_reduce("grad_dist/low_rank_b_all_reduce", sink.world_ranks, "world", n, 4, "float32")}, true,
                fmt::format("all-reduce of the B gradient of factorized row-wise table {} ({} x {} and its row count)",
                            ts.name, ts.low_rank_dim, ts.embedding_dim)),
               kLowRankBAllReduce, t);
      const auto& slots = sink.layout.slots;
      if (std::none_of(slots.begin(), slots.end(), [&](const auto& sl) { return sl.table == t && sl.s.rank == sink.rank; }))
        continue;  // no shard here (more ranks than rows)
      sink.own(sink.compute("low_rank_row_wise_update", OpCategory::optimizer, batch,
                   fmt::format("update of A's local rows and of this rank's copy of B ({} x {}) of {}", ts.low_rank_dim,
                               ts.embedding_dim, ts.name),
                   0, 0, 3 * 4 * n),
               kLowRankUpdate, t);
    }
  }
  bool applies_shard_grads(const Layout& L, int table) const override {
    return std::find(L.low_rank_rw_tables.begin(), L.low_rank_rw_tables.end(), table) != L.low_rank_rw_tables.end();
  }
  void run(const ProgramOp& op, const program::OpOwner& tag, RankContext& ctx, ModuleBatch& b, int self) const override {
    switch (tag.kind) {
      case kOutputDist: {
        auto job = output_dist(ctx, b.slot_out);
        Job* j = job.get();
        b.output_jobs.push_back(std::move(job));
        ctx.queue(op, [&ctx, j] { j->run(ctx); });
        return;
      }
      case kGradDist: grad_dist(ctx, b.dpooled, *b.lengths, b.slot_grad); return;
      case kLowRankBAllReduce:
        b_all_reduce(ctx, tag.arg, b.shard_grads[static_cast<size_t>(self)], b.scratch[static_cast<size_t>(self)]);
        return;
      case kLowRankUpdate: {
        auto& scratch = b.scratch[static_cast<size_t>(self)];
        low_rank_update(ctx, tag.arg, static_cast<LowRankScratch&>(*scratch), b.local.iteration + 1);
        scratch.reset();
        return;
      }
      default: unknown_op("row_wise", op, tag);
    }
  }

 private:
  // The update of a factorized row_wise table t (emit_update's ops, per table in table order on
  // every rank): this rank's dB and row count (zeros without a shard or rows) are summed over
  // the world (b_all_reduce), then A's local rows take dA and, if any rank had a row, every
  // copy of B the same sum (low_rank_update, on the ranks holding a shard) - B stays the same
  // on every rank, as the one B of the unsharded table. `grads`: this rank's shards of the
  // factorized tables, in shard order.
  static void b_all_reduce(RankContext& ctx, int t, std::vector<ShardGrad>& grads, std::unique_ptr<ModuleScratch>& out) {
    const TableSpec& ts = ctx.spec().tables[static_cast<size_t>(t)];
    const int64_t r = ts.low_rank_dim, dim = ts.embedding_dim;
    auto mine = std::find_if(grads.begin(), grads.end(), [&](const ShardGrad& sg) { return sg.table == t; });
    auto s = std::make_unique<LowRankScratch>();
    s->db.assign(static_cast<size_t>(r * dim + 1), 0.0f);
    if (mine != grads.end()) {
      auto [a, b] = ctx.factor_grads(t, mine->shard_index, mine->g);
      s->da = std::move(a);
      std::copy(b.values.begin(), b.values.end(), s->db.begin());
      s->db.back() = static_cast<float>(mine->g.rows.size());
    }
    std::vector<float>& db = s->db;
    ctx.comm(GroupKind::world, "grad_dist/low_rank_b_all_reduce", [&] {
      ctx.group(GroupKind::world)
          .all_reduce_sum("grad_dist/low_rank_b_all_reduce", db.data(), static_cast<int64_t>(db.size()));
    });
    out = std::move(s);
  }
  static void low_rank_update(RankContext& ctx, int t, LowRankScratch& s, int64_t iteration) {
    const Layout& L = ctx.layout();
    const TableSpec& ts = ctx.spec().tables[static_cast<size_t>(t)];
    const int64_t r = ts.low_rank_dim, dim = ts.embedding_dim;
    const auto held = std::find_if(L.slots.begin(), L.slots.end(),
                                   [&](const detail::Slot& sl) { return sl.table == t && sl.s.rank == ctx.rank(); });
    if (held == L.slots.end()) throw std::logic_error("low_rank_row_wise_update on a rank without a shard");
    const std::vector<float>& db = s.db;
    ctx.compute(OpCategory::optimizer, "low_rank_row_wise_update", [&] {
      SparseGrad gb;  // as low_rank_backward's dB: every row of B, dense
      if (db.back() > 0) {
        gb.dim = dim;
        gb.rows.resize(static_cast<size_t>(r));
        std::iota(gb.rows.begin(), gb.rows.end(), int64_t{0});
        gb.values.assign(db.begin(), db.end() - 1);
      }
      ctx.factor_update(t, held->shard, iteration, s.da, gb);
    });
  }
  // Packs the partial sums of this rank's row-wise slots for the reduce-scatter.
  static std::unique_ptr<Job> output_dist(RankContext& ctx, std::vector<DeviceBuffer<float>>& slot_out) {
    const Layout& L = ctx.layout();
    const int W = L.world;
    const int64_t B = L.B, width = L.sum_dims(L.rw_features);
    auto job = std::make_unique<Job>();
    job->on_device = on_device(ctx);
    job->send = ctx.buffer("comm_buffer", static_cast<size_t>(W * B * width));
    if (job->on_device) job->send.release_host_copy();  // the host never reads it
    size_t p = 0;
    for (int j = 0; j < W; ++j)
      for (int f : L.rw_features) {
        const size_t k = ctx.local_slot_of_feature(f);
        const int64_t dim = L.dim[static_cast<size_t>(f)];
        const auto bytes = static_cast<int64_t>(sizeof(float)) * B * dim;
        if (job->on_device)  // device to device, in order with the lookup that wrote slot_out
          ctx.device_copy(job->send.device_data() + p, slot_out[k].device_data() + j * B * dim, bytes);
        else
          std::memcpy(job->send.data() + p, slot_out[k].data() + j * B * dim, static_cast<size_t>(bytes));
        p += static_cast<size_t>(B * dim);
      }
    job->recv = ctx.buffer("comm_buffer", static_cast<size_t>(B * width));
    if (job->on_device) job->recv.release_host_copy();
    job->counts.assign(static_cast<size_t>(W), B * width);
    return job;
  }
  // The gradient dist: the mean-scaled gradients of this rank's bags all-gathered into every
  // row-wise slot's slot_grad (the compute worker waits for it).
  // On the device (on_device(ctx)) dpooled is not yet scaled by 1 / W: the packing scales it.
  static void grad_dist(RankContext& ctx, std::vector<DeviceBuffer<float>>& dpooled,
                        const std::vector<int64_t>& lengths, std::vector<DeviceBuffer<float>>& slot_grad) {
    if (on_device(ctx)) {
      grad_dist_on_device(ctx, dpooled, lengths, slot_grad);
      return;
    }
    const Layout& L = ctx.layout();
    const int W = L.world;
    const int64_t B = L.B, width = L.sum_dims(L.rw_features);
    const CommPrecision prec = ctx.spec().qcomms.backward_precision;
    auto sendb = ctx.buffer("comm_buffer", static_cast<size_t>(B * width));
    size_t p = 0;
    for (int f : L.rw_features) {  // mean-scaled gradients of the bags' sums
      const int64_t dim = L.dim[static_cast<size_t>(f)];
      std::memcpy(sendb.data() + p, dpooled[static_cast<size_t>(f)].data(), sizeof(float) * static_cast<size_t>(B * dim));
      if (is_mean(ctx.spec(), ctx.layout(), f)) scale_rows_mean(lengths, B, f, sendb.data() + p, dim);
      p += static_cast<size_t>(B * dim);
    }
    auto recvb = ctx.buffer("comm_buffer", static_cast<size_t>(W * B * width));
    std::vector<int64_t> counts(static_cast<size_t>(W), B * width);
    ctx.comm(GroupKind::world, "grad_dist/all_gather", [&] {
      ctx.group(GroupKind::world)
          .all_gather_q("grad_dist/all_gather", sendb.data(), recvb.data(), counts, prec, ctx.backward_error());
    });
    p = 0;
    for (int s = 0; s < W; ++s)
      for (int f : L.rw_features) {
        const int64_t dim = L.dim[static_cast<size_t>(f)];
        std::memcpy(slot_grad[ctx.local_slot_of_feature(f)].data() + s * B * dim, recvb.data() + p,
                    sizeof(float) * static_cast<size_t>(B * dim));
        p += static_cast<size_t>(B * dim);
      }
  }
  // grad_dist on the device: the same buffers in the same order (the mean scales' buffer after
  // the send buffer), every value in device memory.
  static void grad_dist_on_device(RankContext& ctx, std::vector<DeviceBuffer<float>>& dpooled,
                                  const std::vector<int64_t>& lengths, std::vector<DeviceBuffer<float>>& slot_grad) {
    const Layout& L = ctx.layout();
    const int W = L.world;
    const int64_t B = L.B, width = L.sum_dims(L.rw_features);
    const float inv_w = 1.0f / static_cast<float>(W);  // as the dense part's scaling on the host
    auto sendb = ctx.buffer("comm_buffer", static_cast<size_t>(B * width));
    sendb.release_host_copy();
    {
      DeviceMeanScales sc = device_mean_scales(ctx, L.rw_features, lengths);
      size_t p = 0;
      for (int f : L.rw_features) {  // (g / W) * mean scale of the bag
        const int64_t dim = L.dim[static_cast<size_t>(f)];
        ctx.device_scale_copy_rows_2d(B, dim, dpooled[static_cast<size_t>(f)].device_data(), dim,
                                      sendb.device_data() + p, dim, inv_w, sc.of(f));
        p += static_cast<size_t>(B * dim);
      }
    }  // the scales go back to the allocator (stream order on a GPU: the kernels read them first)
    auto recvb = ctx.buffer("comm_buffer", static_cast<size_t>(W * B * width));
    recvb.release_host_copy();
    std::vector<int64_t> counts(static_cast<size_t>(W), B * width);
    ctx.comm(GroupKind::world, "grad_dist/all_gather", [&] {
      ctx.group(GroupKind::world)
          .all_gather_v_device("grad_dist/all_gather", sendb.device_data(), recvb.device_data(), counts, sizeof(float));
    });
    size_t p = 0;
    for (int s = 0; s < W; ++s)
      for (int f : L.rw_features) {
        const int64_t dim = L.dim[static_cast<size_t>(f)];
        ctx.device_copy(slot_grad[ctx.local_slot_of_feature(f)].device_data() + s * B * dim, recvb.device_data() + p,
                        static_cast<int64_t>(sizeof(float)) * B * dim);
        p += static_cast<size_t>(B * dim);
      }
    for (int f : L.rw_features) {  // a shard that builds its sparse gradient on the host reads slot_grad there
      const size_t lk = ctx.local_slot_of_feature(f);
      if (!ctx.slot_grad_on_device(lk) && slot_grad[lk].size() > 0)
        ctx.device_to_host(slot_grad[lk].data(), slot_grad[lk].device_data(),
                           static_cast<int64_t>(slot_grad[lk].size() * sizeof(float)));
    }
  }
};

}  // namespace

std::unique_ptr<EmbeddingSharding> row_wise_sharding() { return std::make_unique<RowWise>(); }

}  // namespace embedscope::engine::sharding
