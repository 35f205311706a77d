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
#include <algorithm>
#include <cmath>

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
  DeviceBuffer<float> grad;     // V x D
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
      const int64_t V = ts.rows(), D = ts.embedding_dim;
      const double n_ids = replica_ids(sink, t);
      // the rows the optimizer updates: distinct among every rank's ids (uniform expectation)
      const double updated = program::uniform_distinct_rows(static_cast<double>(V), sink.world * n_ids);
      const auto& world = sink.world_ranks;
      sink.own(sink.compute("backward_data_parallel", OpCategory::optimizer, batch,
                   fmt::format("dense {} x {} gradient and touched flags of data-parallel table {}", V, D, ts.name),
                   std::llround(n_ids), 0, std::llround(program::dp_backward_bytes(n_ids, bags(sink, t), V, D))),
               kBackward, t);
      sink.own(sink.comm("grad_dist/data_parallel_all_reduce", batch,
                {sink.all_reduce("grad_dist/data_parallel_all_reduce", world, "world", program::dp_gradient_elements(V, D),
                                 4, "float32"),
                 sink.all_reduce("grad_dist/data_parallel_touched", world, "world", program::dp_flag_elements(V), 4,
                                 "float32")},
                true,
                fmt::format("all-reduce (sum, as DDP) of the dense {} x {} gradient of {} and of its {} touched flags", V,
                            D, ts.name, V)),
               kAllReduce, t);
      sink.own(sink.compute("optimizer_data_parallel", OpCategory::optimizer, batch,
                   fmt::format("fused {} update of the touched rows of every replica of {}",
                               to_string(sink.spec.optimizer.type), ts.name),
                   std::llround(updated), 0,
                   std::llround(program::dp_scan_bytes(V, D) +
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
  /// the summed gradient on this replica (kOptimizer). Throws OomError (from ctx.buffer) when
  /// the device has no room for the V x (D + 1) floats.
  void run(const ProgramOp& op, const program::OpOwner& tag, RankContext& ctx, ModuleBatch& mb, int self) const override {
    const WorkloadSpec& spec = ctx.spec();
    const LocalBatch& b = mb.local;
    const int64_t B = ctx.layout().B;
    const int t = tag.arg;
    const TableSpec& ts = spec.tables[static_cast<size_t>(t)];
    const int64_t dim = ts.embedding_dim, V = ts.rows();
    auto& scratch = mb.scratch[static_cast<size_t>(self)];
    switch (tag.kind) {
      case kBackward: {
        auto s = std::make_unique<Scratch>();
        s->grad = ctx.buffer("gradients", static_cast<size_t>(V * dim));
        s->touched = ctx.buffer("gradients", static_cast<size_t>(V));
        float* grad = s->grad.data();
        float* touched = s->touched.data();
        ctx.compute(OpCategory::optimizer, "backward_data_parallel", [&] {
          std::fill(grad, grad + V * dim, 0.0f);
          std::fill(touched, touched + V, 0.0f);
          // per feature, bag and id in order: grad[id] += (1 / len for mean) x dpooled[bag]
          for (const int f : ctx.layout().table_features[static_cast<size_t>(t)]) {
            const bool mean = is_mean(spec, ctx.layout(), f);
            const float* g = mb.dpooled[static_cast<size_t>(f)].data();
            const int64_t* off = b.offsets + f * B;
            for (int64_t bag = 0; bag < B; ++bag) {
              const int64_t len = b.lengths[f * B + bag];
              const float sc = !mean ? 1.0f : len > 0 ? 1.0f / static_cast<float>(len) : 0.0f;
              for (int64_t i = off[bag]; i < off[bag + 1]; ++i) {
                const int64_t row = b.values[i];
                float* gr = grad + row * dim;
                for (int64_t c = 0; c < dim; ++c) gr[c] += sc * g[bag * dim + c];
                touched[row] = 1.0f;
              }
            }
          }
        });
        scratch = std::move(s);
        return;
      }
      case kAllReduce: {
        auto& s = static_cast<Scratch&>(*scratch);
        detail::Collectives& world = ctx.group(GroupKind::world);
        ctx.comm(GroupKind::world, "grad_dist/data_parallel_all_reduce", [&] {
          world.all_reduce_sum("grad_dist/data_parallel_all_reduce", s.grad.data(), V * dim);
          world.all_reduce_sum("grad_dist/data_parallel_touched", s.touched.data(), V);
        });
        return;
      }
      case kOptimizer: {
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
