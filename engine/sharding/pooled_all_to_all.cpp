// table_wise and column_wise: every shard holds whole rows (all of a table's, or a range of its
// columns), so each rank's pooled rows of the shard are final: an all-to-all sends each sample
// owner its B x cols block, and the reverse all-to-all brings the gradients back.
// On a rank whose dists run on its device (RankContext::dist_on_device, issue 14) the same blocks
// move in device memory, in the same order: the looked-up rows packed with device-to-device
// copies, the all-to-all on device pointers (Collectives::all_to_all_v_device), each received
// block unpacked with a 2-D device copy into its columns of pooled[f]'s device memory (which the
// resident dense part reads); backward, dpooled's device memory packed with the 1 / W scaling
// fused in (RankDevice::scale_copy_2d, kernels/dist_pack_core.h), the reverse all-to-all, and the
// blocks copied into slot_grad's device memory (to the host only for a slot whose shard does not
// accumulate on the device).
#include <cstring>
#include <numeric>

#include "program/program_sink.h"
#include "embedscope/engine/program/step_program.h"
#include "embedding_sharding.h"

namespace embedscope::engine::sharding {

namespace {

using detail::Layout;
using detail::Slot;

class Job final : public OutputDistJob {
 public:
  DeviceBuffer<float> send, recv;  // allocation order: send, then recv
  // the buffers go back to the allocator in the order they were taken (as the step always freed them)
  ~Job() override { send = {}; recv = {}; }
  std::vector<int64_t> scount, rcount;
  bool on_device = false;  // send and recv are device memory (RankContext::dist_on_device)
  // on the comm thread
  void run(RankContext& ctx) {
    const CommPrecision prec = ctx.spec().qcomms.forward_precision;
    ctx.on_comm_lane(GroupKind::world, "output_dist/all_to_all", [&] {
      if (on_device)  // fp32 (dist_on_device)
        ctx.group(GroupKind::world)
            .all_to_all_v_device("output_dist/all_to_all", send.device_data(), scount, recv.device_data(), rcount,
                                 sizeof(float));
      else
        ctx.group(GroupKind::world)
            .all_to_all_q("output_dist/all_to_all", send.data(), scount, recv.data(), rcount, prec, ctx.forward_error());
    });
  }
  void finish(RankContext& ctx, std::vector<DeviceBuffer<float>>& pooled, const std::vector<int64_t>&) override {
    const Layout& L = ctx.layout();
    constexpr int64_t f4 = sizeof(float);
    size_t p = 0;
    for (int d = 0; d < L.world; ++d)
      for (int k : L.a2a_slots_to[static_cast<size_t>(d)]) {
        const Slot& sl = L.slots[static_cast<size_t>(k)];
        const int64_t dim = L.dim[static_cast<size_t>(sl.feature)], cols = sl.s.num_cols;
        DeviceBuffer<float>& out = pooled[static_cast<size_t>(sl.feature)];
        if (on_device) {  // B rows of cols floats into columns [col_offset, col_offset + cols) of B x dim
          ctx.device_copy_2d(out.device_data() + sl.s.col_offset, dim * f4, recv.device_data() + p, cols * f4, cols * f4,
                             L.B);
        } else {
          float* dst = out.data();
          for (int64_t s = 0; s < L.B; ++s)
            std::memcpy(dst + s * dim + sl.s.col_offset, recv.data() + p + static_cast<size_t>(s * cols),
                        sizeof(float) * static_cast<size_t>(cols));
        }
        p += static_cast<size_t>(L.B * cols);
      }
  }
};

// the module's op kinds (program_sink.h OpOwner::kind)
enum OpKind : int { kOutputDist, kGradDist };

class PooledAllToAll final : public EmbeddingSharding {
 public:
  void emit_output_dist(program::ProgramSink& sink, int batch, bool sync) const override {
    const Layout& L = sink.layout;
    const CommPrecision prec = sink.spec.qcomms.forward_precision;
    std::vector<int64_t> sc(static_cast<size_t>(L.world)), rc(static_cast<size_t>(L.world));
    for (int r = 0; r < L.world; ++r) {
      sc[static_cast<size_t>(r)] = L.B * L.a2a_cols(sink.rank);
      rc[static_cast<size_t>(r)] = L.B * L.a2a_cols(r);
    }
    sink.own(sink.comm("output_dist/all_to_all", batch,
              {sink.all_to_all("output_dist/all_to_all", sink.world_ranks, "world", sc, rc,
                               program::ProgramSink::elem_bytes(prec), program::ProgramSink::dtype(prec))},
              sync, "all-to-all of the pooled embeddings of table-wise and column-wise shards"), kOutputDist);
  }
  void emit_grad_dist(program::ProgramSink& sink, int batch) const override {
    const Layout& L = sink.layout;
    const CommPrecision prec = sink.spec.qcomms.backward_precision;
    std::vector<int64_t> sc(static_cast<size_t>(L.world)), rc(static_cast<size_t>(L.world), L.B * L.a2a_cols(sink.rank));
    for (int d = 0; d < L.world; ++d) sc[static_cast<size_t>(d)] = L.B * L.a2a_cols(d);
    sink.own(sink.comm("grad_dist/all_to_all", batch,
              {sink.all_to_all("grad_dist/all_to_all", sink.world_ranks, "world", sc, rc,
                               program::ProgramSink::elem_bytes(prec), program::ProgramSink::dtype(prec))},
              true, "all-to-all of the pooled-embedding gradients back to the table-wise and column-wise shards"),
             kGradDist);
  }
  void run(const ProgramOp& op, const program::OpOwner& tag, RankContext& ctx, ModuleBatch& b, int) const override {
    switch (tag.kind) {
      case kOutputDist: {  // every rank joins, with empty splits when it has no such shard
        auto job = output_dist(ctx, b.slot_out);
        Job* j = job.get();
        b.output_jobs.push_back(std::move(job));
        ctx.queue(op, [&ctx, j] { j->run(ctx); });
        return;
      }
      case kGradDist: grad_dist(ctx, b.dpooled, b.slot_grad); return;
      default: unknown_op("pooled_all_to_all", op, tag);
    }
  }

 private:
  // Packs the looked-up rows of this rank's slots for the output dist.
  static std::unique_ptr<Job> output_dist(RankContext& ctx, std::vector<DeviceBuffer<float>>& slot_out) {
    const Layout& L = ctx.layout();
    const int W = L.world, me = ctx.rank();
    const int64_t B = L.B;
    auto job = std::make_unique<Job>();
    job->scount.assign(static_cast<size_t>(W), 0);
    job->rcount.assign(static_cast<size_t>(W), 0);
    const auto& my_a2a = L.a2a_slots_to[static_cast<size_t>(me)];
    const int64_t my_cols = L.a2a_cols(me);
    for (int r = 0; r < W; ++r) {
      job->scount[static_cast<size_t>(r)] = B * my_cols;
      job->rcount[static_cast<size_t>(r)] = B * L.a2a_cols(r);
    }
    job->on_device = ctx.dist_on_device();
    job->send = ctx.buffer("comm_buffer", static_cast<size_t>(W * B * my_cols));
    if (job->on_device) job->send.release_host_copy();  // the host never reads it
    size_t p = 0;
    for (int r = 0; r < W; ++r)
      for (int k : my_a2a) {
        const size_t lk = ctx.local_slot(k);
        const int64_t cols = L.slots[static_cast<size_t>(k)].s.num_cols;
        const auto bytes = static_cast<int64_t>(sizeof(float)) * B * cols;
        if (job->on_device)  // device to device, in order with the lookup that wrote slot_out
          ctx.device_copy(job->send.device_data() + p, slot_out[lk].device_data() + r * B * cols, bytes);
        else
          std::memcpy(job->send.data() + p, slot_out[lk].data() + r * B * cols, static_cast<size_t>(bytes));
        p += static_cast<size_t>(B * cols);
      }
    job->recv = ctx.buffer("comm_buffer",
                           static_cast<size_t>(std::accumulate(job->rcount.begin(), job->rcount.end(), int64_t{0})));
    if (job->on_device) job->recv.release_host_copy();
    return job;
  }
  // The gradient dist: dpooled[f] (B x dim) back to the shards, into slot_grad[k] (W*B x cols
  // of local slot k, source rank major); the compute worker waits for the all-to-all. On the
  // device (dist_on_device) dpooled is not yet scaled by 1 / W: the packing scales it.
  static void grad_dist(RankContext& ctx, std::vector<DeviceBuffer<float>>& dpooled,
                        std::vector<DeviceBuffer<float>>& slot_grad) {
    const Layout& L = ctx.layout();
    const int W = L.world, me = ctx.rank();
    const int64_t B = L.B;
    const CommPrecision prec = ctx.spec().qcomms.backward_precision;
    std::vector<int64_t> scount(static_cast<size_t>(W), 0), rcount(static_cast<size_t>(W), 0);
    const auto& my_a2a = L.a2a_slots_to[static_cast<size_t>(me)];
    const int64_t my_cols = L.a2a_cols(me);
    for (int d = 0; d < W; ++d) {
      rcount[static_cast<size_t>(d)] = B * my_cols;
      scount[static_cast<size_t>(d)] = B * L.a2a_cols(d);
    }
    const bool dev = ctx.dist_on_device();
    const float inv_w = 1.0f / static_cast<float>(W);  // as the dense part's scaling on the host
    auto sendb = ctx.buffer("comm_buffer", static_cast<size_t>(std::accumulate(scount.begin(), scount.end(), int64_t{0})));
    if (dev) sendb.release_host_copy();
    size_t p = 0;
    for (int d = 0; d < W; ++d)
      for (int k : L.a2a_slots_to[static_cast<size_t>(d)]) {
        const Slot& sl = L.slots[static_cast<size_t>(k)];
        const int64_t dim = L.dim[static_cast<size_t>(sl.feature)], cols = sl.s.num_cols;
        DeviceBuffer<float>& g = dpooled[static_cast<size_t>(sl.feature)];
        if (dev) {
          ctx.device_scale_copy_2d(B, cols, g.device_data() + sl.s.col_offset, dim, sendb.device_data() + p, cols, inv_w);
        } else {
          const float* src = g.data();
          for (int64_t s = 0; s < B; ++s)
            std::memcpy(sendb.data() + p + static_cast<size_t>(s * cols), src + s * dim + sl.s.col_offset,
                        sizeof(float) * static_cast<size_t>(cols));
        }
        p += static_cast<size_t>(B * cols);
      }
    auto recvb = ctx.buffer("comm_buffer", static_cast<size_t>(W * B * my_cols));
    if (dev) recvb.release_host_copy();
    ctx.comm(GroupKind::world, "grad_dist/all_to_all", [&] {
      if (dev)  // fp32 (dist_on_device)
        ctx.group(GroupKind::world)
            .all_to_all_v_device("grad_dist/all_to_all", sendb.device_data(), scount, recvb.device_data(), rcount,
                                 sizeof(float));
      else
        ctx.group(GroupKind::world)
            .all_to_all_q("grad_dist/all_to_all", sendb.data(), scount, recvb.data(), rcount, prec, ctx.backward_error());
    });
    p = 0;
    for (int s = 0; s < W; ++s)
      for (int k : my_a2a) {
        const size_t lk = ctx.local_slot(k);
        const int64_t cols = L.slots[static_cast<size_t>(k)].s.num_cols;
        const auto bytes = static_cast<int64_t>(sizeof(float)) * B * cols;
        if (dev)
          ctx.device_copy(slot_grad[lk].device_data() + s * B * cols, recvb.device_data() + p, bytes);
        else
          std::memcpy(slot_grad[lk].data() + s * B * cols, recvb.data() + p, static_cast<size_t>(bytes));
        p += static_cast<size_t>(B * cols);
      }
    if (!dev) return;
    for (int k : my_a2a) {  // a shard that builds its sparse gradient on the host reads slot_grad there
      const size_t lk = ctx.local_slot(k);
      if (!ctx.slot_grad_on_device(lk) && slot_grad[lk].size() > 0)
        ctx.device_to_host(slot_grad[lk].data(), slot_grad[lk].device_data(),
                           static_cast<int64_t>(slot_grad[lk].size() * sizeof(float)));
    }
  }
};

}  // namespace

std::unique_ptr<EmbeddingSharding> pooled_all_to_all_sharding() { return std::make_unique<PooledAllToAll>(); }

}  // namespace embedscope::engine::sharding
