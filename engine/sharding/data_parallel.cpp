// data_parallel: every rank holds a full replica of the table (TorchRec's DP sharding,
// torchrec/distributed/sharding/dp_sharding.py DpPooledEmbeddingSharding), so the lookup is local
// and needs no dist (its DpSparseFeaturesDist and DpPooledEmbeddingDist are no-ops). TorchRec
// trains the replicas as DistributedDataParallel trains any parameter (model_parallel.py
// DefaultDataParallelWrapper wraps them in DDP): each replica's weight gradient is a dense V x D
// tensor (the DENSE compute kernel, fbgemm_gpu's DenseTableBatchedEmbeddingBagsCodegen, whose
// backward writes the whole gradient), and DDP all-reduces it over the world (Reducer: sum of the
// buckets, divided by the world size) before the optimizer steps. Embedscope does the same, one
// table at a time (program/data_parallel_bytes.h has the figures):
//   backward_data_parallel             this rank's gradient scattered into a dense V x D fp32
//                                      buffer, and a V-float buffer of touched flags (1 for a row
//                                      one of this rank's ids hit, else 0)
//   grad_dist/data_parallel_all_reduce one all-reduce (sum) of the V x D gradient over the world
//                                      ("grad_dist/data_parallel_all_reduce", 4 V D bytes) and one
//                                      of the flags ("grad_dist/data_parallel_touched", 4 V bytes)
//   optimizer_data_parallel            the fused optimizer on every replica, applied to the rows
//                                      some rank touched (summed flag > 0) with the summed
//                                      gradient, so the replicas stay identical
// The sum is DDP's average: the pooled gradients (dpooled) are already those of the global-batch
// mean loss (exec/threaded/rank_train.cpp scales them by 1 / W), which is DDP's mean of the
// ranks' local-mean-loss gradients; the numbers are those of the unsharded reference
// (engine/reference/reference.cpp: 1 / W per rank, summed).
//
// Why the flags: the reference and every other sharding type update only the rows the global
// batch touched (FBGEMM's fused sparse update, kernels.h apply_row_optimizer), and a row with a
// zero gradient is not a row left alone by every optimizer: sgd leaves it (w -= lr x 0);
// rowwise_adagrad leaves its weights (the step is lr x 0 / (sqrt(m) + eps)) and its state (m +=
// 0); adam does not: its moments decay (m1 = b1 m1, m2 = b2 m2) and the weights move by
// lr m1_hat / (sqrt(m2_hat) + eps) - PyTorch's torch/optim/adam.py _single_tensor_adam
// (exp_avg.lerp_(grad, 1 - beta1); exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
// param.addcdiv_(exp_avg, denom, -step_size)) on a dense gradient does exactly that to every row
// TorchRec's DP table holds. And rows stored as int8 / int4 / with stochastic rounding are encoded
// again by any update (reference.cpp store_as), so even sgd would move an untouched row's stored
// code. A gradient row that sums to zero is not untouched either (ids whose gradients cancel).
// So Embedscope keeps the sparse semantics of the reference (a documented difference from
// TorchRec's dense optimizer on DP tables, for the optimizers whose state moves on a zero
// gradient) at the price of the flags' all-reduce, 4 V bytes (1/D of the gradient's). Flags sum
// to at most W (exact in fp32). qcomms do not apply: TorchRec's DP sharding takes no
// qcomm_codecs_registry (its dists are no-ops) and DDP's all-reduce is outside QCommsConfig, as
// the reference has it (reference.cpp: data-parallel tables communicate neither precision).
//
// A factorized table (low_rank_dim r: E = A B, model/low_rank.h) has A (V x r) and B (r x D) as
// its parameters, so DDP all-reduces their gradients, not E's: backward_data_parallel sums this
// rank's gradient rows sparsely (the rows its ids hit), takes dA (those rows x r) and dB (r x D)
// from A and B (RankContext::factor_grads, kernels/low_rank.h low_rank_backward) and scatters
// them into one dense buffer of V r + r D floats (dA's rows, then dB), which is all-reduced in
// place of the V x D gradient; the optimizer updates A's touched rows and, if any rank touched
// a row, B (RankContext::factor_update), as the row_wise sharding does with its dB. The sums
// equal the reference's (its dA and dB are linear in the summed gradient) up to fp32 order.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "program/data_parallel_bytes.h"
#include "program/program_sink.h"
#include "embedscope/engine/program/step_program.h"
#include "embedding_sharding.h"

namespace embedscope::engine::sharding {

namespace {

using sessions::OpCategory;

// the module's op kinds (program_sink.h OpOwner::kind); arg: the replicated table
enum OpKind : int { kBackward, kAllReduce, kOptimizer };

// One table's dense gradient and touched flags, from its backward op to its optimizer op,
// freed in the reverse order of their allocation.
struct Scratch final : ModuleScratch {
  DeviceBuffer<float> grad;     // V x D (a factorized table: V x r of dA, then r x D of dB)
  DeviceBuffer<float> touched;  // V flags, then the number of ranks that touched the row
  ~Scratch() override { touched = {}; grad = {}; }
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
      const int64_t V = ts.rows(), D = ts.embedding_dim, r = ts.low_rank_dim;
      const double n_ids = replica_ids(sink, t);
      const std::string what = r > 0 ? fmt::format("factors' {} x {} + {} x {}", V, r, r, D) : fmt::format("dense {} x {}", V, D);
      // the rows the optimizer updates: distinct among every rank's ids (uniform expectation)
      const double updated = program::uniform_distinct_rows(static_cast<double>(V), sink.world * n_ids);
      const auto& world = sink.world_ranks;
      sink.own(sink.compute("backward_data_parallel", OpCategory::optimizer, batch,
                   fmt::format("{} gradient and touched flags of data-parallel table {}", what, ts.name),
                   std::llround(n_ids), 0, std::llround(program::dp_backward_bytes(n_ids, bags(sink, t), V, D, r))),
               kBackward, t);
      sink.own(sink.comm("grad_dist/data_parallel_all_reduce", batch,
                {sink.all_reduce("grad_dist/data_parallel_all_reduce", world, "world", program::dp_gradient_elements(V, D, r),
                                 4, "float32"),
                 sink.all_reduce("grad_dist/data_parallel_touched", world, "world", program::dp_flag_elements(V), 4,
                                 "float32")},
                true,
                fmt::format("all-reduce (sum, as DDP) of the {} gradient of {} and of its {} touched flags", what,
                            ts.name, V)),
               kAllReduce, t);
      sink.own(sink.compute("optimizer_data_parallel", OpCategory::optimizer, batch,
                   fmt::format("fused {} update of the touched rows of every replica of {}",
                               to_string(sink.spec.optimizer.type), ts.name),
                   std::llround(updated), 0,
                   std::llround(program::dp_scan_bytes(V, D, r) +
                                program::ProgramSink::update_bytes(updated, ts, D, 0, sink.spec.optimizer.type))),
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

  /// The update of each replicated table t (emit_update's ops, in dp_tables order): this rank's
  /// gradient of its bags into a dense V x D buffer and its touched flags (kBackward), both
  /// all-reduced (sum) over the world (kAllReduce), then the rows some rank touched updated with
  /// the summed gradient on this replica (kOptimizer); a factorized table's buffer holds dA and
  /// dB instead (V r + r D floats, factor_backward / factor_update). Throws OomError (from
  /// ctx.buffer) when the device has no room for the buffer and the V flags.
  void run(const ProgramOp& op, const program::OpOwner& tag, RankContext& ctx, ModuleBatch& mb, int self) const override {
    const WorkloadSpec& spec = ctx.spec();
    const LocalBatch& b = mb.local;
    const int t = tag.arg;
    const TableSpec& ts = spec.tables[static_cast<size_t>(t)];
    const int64_t dim = ts.embedding_dim, V = ts.rows();
    auto& scratch = mb.scratch[static_cast<size_t>(self)];
    switch (tag.kind) {
      case kBackward: {
        if (ts.low_rank_dim > 0) {
          scratch = factor_backward(ctx, mb, t);
          return;
        }
        auto s = std::make_unique<Scratch>();
        s->grad = ctx.buffer("gradients", static_cast<size_t>(V * dim));
        s->touched = ctx.buffer("gradients", static_cast<size_t>(V));
        float* grad = s->grad.data();
        float* touched = s->touched.data();
        ctx.compute(OpCategory::optimizer, "backward_data_parallel", [&] {
          std::fill(grad, grad + V * dim, 0.0f);
          std::fill(touched, touched + V, 0.0f);
          // per feature, bag and id in order: grad[id] += (1 / len for mean) x dpooled[bag]
          for_each_id(ctx, mb, t, [&](int64_t row, const float* g, float sc) {
            float* gr = grad + row * dim;
            for (int64_t c = 0; c < dim; ++c) gr[c] += sc * g[c];
            touched[row] = 1.0f;
          });
        });
        scratch = std::move(s);
        return;
      }
      case kAllReduce: {
        auto& s = static_cast<Scratch&>(*scratch);
        detail::Collectives& world = ctx.group(GroupKind::world);
        ctx.comm(GroupKind::world, "grad_dist/data_parallel_all_reduce", [&] {
          world.all_reduce_sum("grad_dist/data_parallel_all_reduce", s.grad.data(),
                               program::dp_gradient_elements(V, dim, ts.low_rank_dim));
          world.all_reduce_sum("grad_dist/data_parallel_touched", s.touched.data(), V);
        });
        return;
      }
      case kOptimizer: {
        if (ts.low_rank_dim > 0) {
          factor_update(ctx, t, b.iteration + 1, scratch);
          return;
        }
        ctx.compute(OpCategory::optimizer, "optimizer_data_parallel", [&] {
          const auto& s = static_cast<const Scratch&>(*scratch);
          SparseGrad g;  // the rows some rank touched, ascending, with their summed gradients
          g.dim = dim;
          for (int64_t r = 0; r < V; ++r) {
            if (s.touched.data()[r] == 0.0f) continue;
            g.rows.push_back(r);
            g.values.insert(g.values.end(), s.grad.data() + r * dim, s.grad.data() + (r + 1) * dim);
          }
          // the dense buffers go before the update, so the update's own device buffers (the
          // cuda rank stages the rows it updates) never add to them: the memory estimate's
          // peak of the table's update is the gradient and the flags (planner/memory_replay.cpp)
          scratch.reset();
          ctx.update(t, ctx.rank(), b.iteration + 1, g);
        });
        return;
      }
      default: unknown_op("data_parallel", op, tag);
    }
  }

 private:
  // Calls fn(row, gradient of its bag (D floats), scale) for each id of table t's features in
  // this rank's batch, per feature, bag and id in order (scale: 1 / len for mean pooling, else 1).
  template <class Fn>
  static void for_each_id(RankContext& ctx, const ModuleBatch& mb, int t, Fn&& fn) {
    const WorkloadSpec& spec = ctx.spec();
    const LocalBatch& b = mb.local;
    const int64_t B = ctx.layout().B;
    const int64_t dim = spec.tables[static_cast<size_t>(t)].embedding_dim;
    for (const int f : ctx.layout().table_features[static_cast<size_t>(t)]) {
      const bool mean = is_mean(spec, ctx.layout(), f);
      const float* g = mb.dpooled[static_cast<size_t>(f)].data();
      const int64_t* off = b.offsets + f * B;
      for (int64_t bag = 0; bag < B; ++bag) {
        const int64_t len = b.lengths[f * B + bag];
        const float sc = !mean ? 1.0f : len > 0 ? 1.0f / static_cast<float>(len) : 0.0f;
        for (int64_t i = off[bag]; i < off[bag + 1]; ++i) fn(b.values[i], g + bag * dim, sc);
      }
    }
  }

  // backward_data_parallel of a factorized table t (V x D, rank r): this rank's gradient rows
  // summed sparsely (ascending rows), dA and dB of them from A and B before any update
  // (factor_grads), scattered into the V r + r D buffer (dA's rows, then dB) with the flags.
  static std::unique_ptr<Scratch> factor_backward(RankContext& ctx, const ModuleBatch& mb, int t) {
    const TableSpec& ts = ctx.spec().tables[static_cast<size_t>(t)];
    const int64_t V = ts.rows(), dim = ts.embedding_dim, r = ts.low_rank_dim;
    auto s = std::make_unique<Scratch>();
    s->grad = ctx.buffer("gradients", static_cast<size_t>(program::dp_gradient_elements(V, dim, r)));
    s->touched = ctx.buffer("gradients", static_cast<size_t>(V));
    float* grad = s->grad.data();
    float* touched = s->touched.data();
    ctx.compute(OpCategory::optimizer, "backward_data_parallel", [&] {
      std::fill(grad, grad + program::dp_gradient_elements(V, dim, r), 0.0f);
      std::fill(touched, touched + V, 0.0f);
      std::map<int64_t, std::vector<float>> rows;  // E's gradient rows of this rank's ids, ascending
      for_each_id(ctx, mb, t, [&](int64_t row, const float* g, float sc) {
        auto& gr = rows[row];
        if (gr.empty()) gr.assign(static_cast<size_t>(dim), 0.0f);
        for (int64_t c = 0; c < dim; ++c) gr[static_cast<size_t>(c)] += sc * g[c];
        touched[row] = 1.0f;
      });
      SparseGrad g;
      g.dim = dim;
      for (auto& [row, v] : rows) {
        g.rows.push_back(row);
        g.values.insert(g.values.end(), v.begin(), v.end());
      }
      const auto [da, db] = ctx.factor_grads(t, ctx.rank(), g);
      for (size_t u = 0; u < da.rows.size(); ++u)
        std::copy_n(da.values.data() + u * static_cast<size_t>(r), r, grad + da.rows[u] * r);
      std::copy(db.values.begin(), db.values.end(), grad + V * r);  // empty without rows
    });
    return s;
  }

  // optimizer_data_parallel of a factorized table t: A's rows some rank touched take the summed
  // dA, and B the summed dB when any rank touched a row (the reference's one B moves with any
  // row of the global batch), on this replica.
  static void factor_update(RankContext& ctx, int t, int64_t iteration, std::unique_ptr<ModuleScratch>& scratch) {
    const TableSpec& ts = ctx.spec().tables[static_cast<size_t>(t)];
    const int64_t V = ts.rows(), dim = ts.embedding_dim, r = ts.low_rank_dim;
    ctx.compute(OpCategory::optimizer, "optimizer_data_parallel", [&] {
      const auto& s = static_cast<const Scratch&>(*scratch);
      SparseGrad da, db;
      da.dim = r;
      db.dim = dim;
      for (int64_t row = 0; row < V; ++row) {
        if (s.touched.data()[row] == 0.0f) continue;
        da.rows.push_back(row);
        da.values.insert(da.values.end(), s.grad.data() + row * r, s.grad.data() + (row + 1) * r);
      }
      if (!da.rows.empty()) {
        db.rows.resize(static_cast<size_t>(r));
        std::iota(db.rows.begin(), db.rows.end(), int64_t{0});
        db.values.assign(s.grad.data() + V * r, s.grad.data() + V * r + r * dim);
      }
      scratch.reset();  // as the full table's: the buffers go before the update
      ctx.factor_update(t, ctx.rank(), iteration, da, db);
    });
  }

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
