// table_row_wise and grid_shard: a table's rows are split over the ranks of one node (TorchRec's
// TWRW), or, for grid_shard, each column block of the table is (TorchRec's grid sharding, whose
// dist is TWRW's per column block). The partial sums of every block of a node
// (Layout::node_blocks) are reduce-scattered inside the node (fast links), then an all-to-all
// across nodes brings each sample owner its bags, each block written into its columns of the
// feature's pooled output; gradients take the reverse path (all-to-all across nodes,
// all-gather inside the node).
// On a rank whose dists run on the device (RankContext::pooled_on_device of the module's
// features; issue 14) the same values move in device memory: the partial sums packed with
// device-to-device copies as [local rank][node][block] (the host path packs [local rank][block]
// [node] and rearranges the reduce-scatter's result on the host for the all-to-all; this order
// makes the result the all-to-all's send buffer as it is: the same sums, permuted), the
// reduce-scatter and the all-to-all on device pointers (Collectives::reduce_scatter_device,
// all_to_all_v_device), each block added into its columns of pooled[f]'s device memory with the
// mean scaling (RankContext::device_add_scale_rows_2d); backward, dpooled's columns packed with
// 1 / W and the mean scale fused in (device_scale_copy_rows_2d), the all-to-all and the
// all-gather on device pointers (all_gather_v_device), the blocks copied into slot_grad's device
// memory (to the host for a slot whose shard accumulates there).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "program/program_sink.h"
#include "embedscope/engine/program/step_program.h"
#include "embedding_sharding.h"

namespace embedscope::engine::sharding {

namespace {

using detail::Layout;
using detail::NodeBlock;

// Columns [c0, c0 + cols) of a B x dim block into B contiguous rows of `cols` floats.
void take_columns(const float* src, int64_t B, int64_t dim, int64_t c0, int64_t cols, float* dst) {
  for (int64_t s = 0; s < B; ++s)
    std::memcpy(dst + s * cols, src + s * dim + c0, sizeof(float) * static_cast<size_t>(cols));
}

// Per block of `blocks` (the node's), the index of its slot among this rank's slots: one scan
// of the rank's slots per block, once a call.
std::vector<size_t> block_slots(const Layout& L, int rank, const std::vector<NodeBlock>& blocks) {
  std::vector<size_t> out;
  out.reserve(blocks.size());
  for (const NodeBlock& nb : blocks) out.push_back(static_cast<size_t>(L.local_slot_of(rank, nb.feature, nb.col_offset)));
  return out;
}

// Whether this rank's table_row_wise / grid_shard dists run on its device: every block's feature's
// pooled output stays there (the same on every rank).
bool on_device(const RankContext& ctx) {
  const Layout& L = ctx.layout();
  bool any = false;
  for (const auto& blocks : L.node_blocks)
    for (const NodeBlock& nb : blocks) {
      if (!ctx.pooled_on_device(nb.feature)) return false;
      any = true;
    }
  return any;
}

// The module's features (every node's blocks'), each once.
std::vector<int> block_features(const Layout& L) {
  std::vector<int> fs;
  for (const auto& blocks : L.node_blocks)
    for (const NodeBlock& nb : blocks)
      if (std::find(fs.begin(), fs.end(), nb.feature) == fs.end()) fs.push_back(nb.feature);
  return fs;
}

class Job final : public OutputDistJob {
 public:
  DeviceBuffer<float> send, rs, a2a_send, recv;  // allocation order (on the device: no a2a_send)
  // the buffers go back to the allocator in the order they were taken (as the step always freed them)
  ~Job() override { send = {}; rs = {}; a2a_send = {}; recv = {}; }
  std::vector<int64_t> counts, scount, rcount;
  bool on_device = false;  // the buffers are device memory (on_device(ctx)); rs is the all-to-all's send
  // on the comm thread: the reduce-scatter in the node, then rs rearranged for the all-to-all
  void run_intra_node(RankContext& ctx) {
    const Layout& L = ctx.layout();
    const CommPrecision prec = ctx.spec().qcomms.forward_precision;
    if (on_device) {  // fp32; send packed [l][m][block]: rs is [m][block], as the all-to-all sends it
      ctx.on_comm_lane(GroupKind::node, "output_dist/reduce_scatter_intra_node", [&] {
        ctx.group(GroupKind::node)
            .reduce_scatter_device("output_dist/reduce_scatter_intra_node", send.device_data(), counts, rs.device_data());
      });
      return;
    }
    const auto& blocks = L.node_blocks[static_cast<size_t>(ctx.rank() / L.local)];
    ctx.on_comm_lane(GroupKind::node, "output_dist/reduce_scatter_intra_node", [&] {
      ctx.group(GroupKind::node)
          .reduce_scatter_q("output_dist/reduce_scatter_intra_node", send.data(), counts, rs.data(), prec,
                            ctx.forward_error());
    });
    // rs: [block][node m][B x cols] -> send block m to node m
    size_t q0 = 0;
    for (int m = 0; m < L.nodes; ++m) {
      size_t q = 0;
      for (const NodeBlock& nb : blocks) {
        std::memcpy(a2a_send.data() + q0, rs.data() + q + static_cast<size_t>(m * L.B * nb.cols),
                    sizeof(float) * static_cast<size_t>(L.B * nb.cols));
        q0 += static_cast<size_t>(L.B * nb.cols);
        q += static_cast<size_t>(L.nodes * L.B * nb.cols);
      }
    }
  }
  // on the comm thread: the all-to-all across nodes
  void run_cross_node(RankContext& ctx) {
    const CommPrecision prec = ctx.spec().qcomms.forward_precision;
    ctx.on_comm_lane(GroupKind::cross, "output_dist/all_to_all_cross_node", [&] {
      if (on_device)
        ctx.group(GroupKind::cross)
            .all_to_all_v_device("output_dist/all_to_all_cross_node", rs.device_data(), scount, recv.device_data(), rcount,
                                 sizeof(float));
      else
        ctx.group(GroupKind::cross)
          .all_to_all_q("output_dist/all_to_all_cross_node", a2a_send.data(), scount, recv.data(), rcount, prec,
                        ctx.forward_error());
    });
  }
  void finish(RankContext& ctx, std::vector<DeviceBuffer<float>>& pooled, const std::vector<int64_t>& lengths) override {
    const Layout& L = ctx.layout();
    size_t p = 0;
    if (on_device) {  // (0 + block) * mean scale into its columns of pooled's device memory
      DeviceMeanScales sc = device_mean_scales(ctx, block_features(L), lengths);
      for (int m = 0; m < L.nodes; ++m)
        for (const NodeBlock& nb : L.node_blocks[static_cast<size_t>(m)]) {
          const int64_t dim = L.dim[static_cast<size_t>(nb.feature)];
          ctx.device_add_scale_rows_2d(L.B, nb.cols, recv.device_data() + p, nb.cols,
                                       pooled[static_cast<size_t>(nb.feature)].device_data() + nb.col_offset, dim,
                                       sc.of(nb.feature), false);
          p += static_cast<size_t>(L.B * nb.cols);
        }
      return;
    }
    for (int m = 0; m < L.nodes; ++m)
      for (const NodeBlock& nb : L.node_blocks[static_cast<size_t>(m)]) {
        const int64_t dim = L.dim[static_cast<size_t>(nb.feature)];
        // added to pooled's columns: they hold the sums of the bags' hot rows (hot_rows.cpp), zeros
        // without any; then the sum is divided by the full bag length for mean pooling
        const float* block = recv.data() + p;
        const bool mean = is_mean(ctx.spec(), ctx.layout(), nb.feature);
        float* out = pooled[static_cast<size_t>(nb.feature)].data();
        for (int64_t s = 0; s < L.B; ++s) {
          const int64_t len = lengths[static_cast<size_t>(nb.feature * L.B + s)];
          const float sc = !mean ? 1.0f : len > 0 ? 1.0f / static_cast<float>(len) : 0.0f;
          float* row = out + s * dim + nb.col_offset;
          for (int64_t c = 0; c < nb.cols; ++c) row[c] = (row[c] + block[s * nb.cols + c]) * sc;
        }
        p += static_cast<size_t>(L.B * nb.cols);
      }
  }
};

// the module's op kinds (program_sink.h OpOwner::kind)
enum OpKind : int { kOutputDistIntraNode, kOutputDistCrossNode, kGradDistCrossNode, kGradDistIntraNode };

// The gradient dist's buffers, from its all-to-all across nodes to its all-gather in the node
// (freed in the reverse order of their allocation, gathered first).
struct GradScratch final : ModuleScratch {
  DeviceBuffer<float> sendb, cross_recv, gathered;
  ~GradScratch() override { gathered = {}; cross_recv = {}; sendb = {}; }
};

class TableRowWise final : public EmbeddingSharding {
 public:
  void emit_output_dist(program::ProgramSink& sink, int batch, bool sync) const override {
    const Layout& L = sink.layout;
    const CommPrecision prec = sink.spec.qcomms.forward_precision;
    const int64_t eb = program::ProgramSink::elem_bytes(prec);
    const char* dt = program::ProgramSink::dtype(prec);
    const int64_t width = L.node_width(sink.rank / L.local);
    sink.own(sink.comm("output_dist/reduce_scatter_intra_node", batch,
              {sink.reduce_scatter("output_dist/reduce_scatter_intra_node", sink.node_ranks, sink.node_group,
                                   std::vector<int64_t>(static_cast<size_t>(L.local), L.nodes * L.B * width), eb, dt)},
              sync, "reduce-scatter of the table-row-wise partial sums inside the node"),
             kOutputDistIntraNode);
    std::vector<int64_t> sc(static_cast<size_t>(L.nodes), L.B * width), rc(static_cast<size_t>(L.nodes));
    for (int m = 0; m < L.nodes; ++m) rc[static_cast<size_t>(m)] = L.B * L.node_width(m);
    sink.own(sink.comm("output_dist/all_to_all_cross_node", batch,
              {sink.all_to_all("output_dist/all_to_all_cross_node", sink.cross_ranks, sink.cross_group, sc, rc, eb, dt)},
              sync, "all-to-all of the table-row-wise sums across nodes, to the ranks owning the samples"),
             kOutputDistCrossNode);
  }
  void emit_grad_dist(program::ProgramSink& sink, int batch) const override {
    const Layout& L = sink.layout;
    const CommPrecision prec = sink.spec.qcomms.backward_precision;
    const int64_t eb = program::ProgramSink::elem_bytes(prec);
    const char* dt = program::ProgramSink::dtype(prec);
    const int64_t width = L.node_width(sink.rank / L.local);
    std::vector<int64_t> sc(static_cast<size_t>(L.nodes)), rc(static_cast<size_t>(L.nodes), L.B * width);
    for (int m = 0; m < L.nodes; ++m) sc[static_cast<size_t>(m)] = L.B * L.node_width(m);
    sink.own(sink.comm("grad_dist/all_to_all_cross_node", batch,
              {sink.all_to_all("grad_dist/all_to_all_cross_node", sink.cross_ranks, sink.cross_group, sc, rc, eb, dt)},
              true, "all-to-all of the table-row-wise gradients across nodes"),
             kGradDistCrossNode);
    sink.own(sink.comm("grad_dist/all_gather_intra_node", batch,
              {sink.all_gather("grad_dist/all_gather_intra_node", sink.node_ranks, sink.node_group,
                               std::vector<int64_t>(static_cast<size_t>(L.local), L.nodes * L.B * width), eb, dt)},
              true, "all-gather of the table-row-wise gradients inside the node"),
             kGradDistIntraNode);
  }
  void run(const ProgramOp& op, const program::OpOwner& tag, RankContext& ctx, ModuleBatch& b, int self) const override {
    // the modules' scratch exists from the train phase on: only the gradient dist reads it (the
    // output dist ops run before it is sized; UBSan: a reference into an empty vector)
    auto scratch = [&]() -> std::unique_ptr<ModuleScratch>& { return b.scratch.at(static_cast<size_t>(self)); };
    switch (tag.kind) {
      case kOutputDistIntraNode: {  // packs every buffer of the dist (its first op)
        auto job = output_dist(ctx, b.slot_out);
        Job* j = job.get();
        b.output_jobs.push_back(std::move(job));
        ctx.queue(op, [&ctx, j] { j->run_intra_node(ctx); });
        return;
      }
      case kOutputDistCrossNode: {  // the job its first op made, the last one of the batch so far
        Job* j = static_cast<Job*>(b.output_jobs.back().get());
        ctx.queue(op, [&ctx, j] { j->run_cross_node(ctx); });
        return;
      }
      case kGradDistCrossNode: {
        auto s = std::make_unique<GradScratch>();
        grad_dist_cross_node(ctx, b.dpooled, *b.lengths, *s);
        scratch() = std::move(s);
        return;
      }
      case kGradDistIntraNode:
        grad_dist_intra_node(ctx, static_cast<GradScratch&>(*scratch()), b.slot_grad);
        scratch().reset();  // gathered, cross_recv, sendb
        return;
      default: unknown_op("table_row_wise", op, tag);
    }
  }

 private:
  // Packs the partial sums of this rank's blocks for the output dist, every buffer of it.
  static std::unique_ptr<Job> output_dist(RankContext& ctx, std::vector<DeviceBuffer<float>>& slot_out) {
    const Layout& L = ctx.layout();
    const int64_t B = L.B;
    const int node = ctx.rank() / L.local;
    const auto& blocks = L.node_blocks[static_cast<size_t>(node)];
    const int64_t width = L.node_width(node);
    auto job = std::make_unique<Job>();
    // block for local rank l: [column block][node m][B x cols] rows of sample owner m*local + l
    job->send = ctx.buffer("comm_buffer", static_cast<size_t>(L.local * L.nodes * B * width));
    const std::vector<size_t> slot = block_slots(L, ctx.rank(), blocks);
    size_t p = 0;
    job->on_device = on_device(ctx);
    if (job->on_device) {  // [l][m][block], device to device in order with the lookup
      job->send.release_host_copy();
      for (int l = 0; l < L.local; ++l)
        for (int m = 0; m < L.nodes; ++m)
          for (size_t b = 0; b < blocks.size(); ++b) {
            const NodeBlock& nb = blocks[b];
            ctx.device_copy(job->send.device_data() + p, slot_out[slot[b]].device_data() + (m * L.local + l) * B * nb.cols,
                            static_cast<int64_t>(sizeof(float)) * B * nb.cols);
            p += static_cast<size_t>(B * nb.cols);
          }
    }
    for (int l = 0; l < L.local && !job->on_device; ++l)
      for (size_t b = 0; b < blocks.size(); ++b) {
        const NodeBlock& nb = blocks[b];
        const size_t k = slot[b];
        for (int m = 0; m < L.nodes; ++m) {
          std::memcpy(job->send.data() + p, slot_out[k].data() + (m * L.local + l) * B * nb.cols,
                      sizeof(float) * static_cast<size_t>(B * nb.cols));
          p += static_cast<size_t>(B * nb.cols);
        }
      }
    job->rs = ctx.buffer("comm_buffer", static_cast<size_t>(L.nodes * B * width));
    job->counts.assign(static_cast<size_t>(L.local), L.nodes * B * width);
    job->scount.assign(static_cast<size_t>(L.nodes), B * width);
    job->rcount.assign(static_cast<size_t>(L.nodes), 0);
    for (int m = 0; m < L.nodes; ++m) job->rcount[static_cast<size_t>(m)] = B * L.node_width(m);
    if (!job->on_device) job->a2a_send = ctx.buffer("comm_buffer", job->rs.size());
    job->recv = ctx.buffer("comm_buffer",
                           static_cast<size_t>(std::accumulate(job->rcount.begin(), job->rcount.end(), int64_t{0})));
    if (job->on_device) {
      job->rs.release_host_copy();
      job->recv.release_host_copy();
    }
    return job;
  }
  // The gradient dist, first op: the gradients of every node's blocks (mean-scaled) to the
  // nodes across (the compute worker waits); its buffers stay in `s`.
  static void grad_dist_cross_node(RankContext& ctx, std::vector<DeviceBuffer<float>>& dpooled,
                                   const std::vector<int64_t>& lengths, GradScratch& s) {
    if (on_device(ctx)) {
      grad_dist_cross_node_on_device(ctx, dpooled, lengths, s);
      return;
    }
    const Layout& L = ctx.layout();
    const int64_t B = L.B;
    const CommPrecision prec = ctx.spec().qcomms.backward_precision;
    const int node = ctx.rank() / L.local;
    const int64_t width = L.node_width(node);
    std::vector<int64_t> scount(static_cast<size_t>(L.nodes)), rcount(static_cast<size_t>(L.nodes), B * width);
    std::vector<float> sendv;
    for (int m = 0; m < L.nodes; ++m) {
      scount[static_cast<size_t>(m)] = B * L.node_width(m);
      for (const NodeBlock& nb : L.node_blocks[static_cast<size_t>(m)]) {
        const int64_t dim = L.dim[static_cast<size_t>(nb.feature)];
        const size_t at = sendv.size();
        sendv.resize(at + static_cast<size_t>(B * nb.cols));
        take_columns(dpooled[static_cast<size_t>(nb.feature)].data(), B, dim, nb.col_offset, nb.cols, sendv.data() + at);
        if (is_mean(ctx.spec(), ctx.layout(), nb.feature)) scale_rows_mean(lengths, B, nb.feature, sendv.data() + at, nb.cols);
      }
    }
    s.sendb = ctx.buffer("comm_buffer", sendv.size());
    std::copy(sendv.begin(), sendv.end(), s.sendb.data());
    s.cross_recv = ctx.buffer("comm_buffer", static_cast<size_t>(L.nodes * B * width));  // [m][block][B x cols]
    ctx.comm(GroupKind::cross, "grad_dist/all_to_all_cross_node", [&] {
      ctx.group(GroupKind::cross)
          .all_to_all_q("grad_dist/all_to_all_cross_node", s.sendb.data(), scount, s.cross_recv.data(), rcount, prec,
                        ctx.backward_error());
    });
  }
  // grad_dist_cross_node on the device: the same send buffer (its mean scales' buffer taken and
  // freed before it), every value in device memory.
  static void grad_dist_cross_node_on_device(RankContext& ctx, std::vector<DeviceBuffer<float>>& dpooled,
                                             const std::vector<int64_t>& lengths, GradScratch& s) {
    const Layout& L = ctx.layout();
    const int64_t B = L.B;
    const int node = ctx.rank() / L.local;
    const int64_t width = L.node_width(node);
    const float inv_w = 1.0f / static_cast<float>(L.world);  // as the dense part's scaling on the host
    std::vector<int64_t> scount(static_cast<size_t>(L.nodes)), rcount(static_cast<size_t>(L.nodes), B * width);
    int64_t total = 0;
    for (int m = 0; m < L.nodes; ++m) {
      scount[static_cast<size_t>(m)] = B * L.node_width(m);
      total += scount[static_cast<size_t>(m)];
    }
    DeviceMeanScales sc = device_mean_scales(ctx, block_features(L), lengths);
    DeviceBuffer<float> sendb = ctx.buffer("comm_buffer", static_cast<size_t>(total));
    sendb.release_host_copy();
    size_t at = 0;
    for (int m = 0; m < L.nodes; ++m)
      for (const NodeBlock& nb : L.node_blocks[static_cast<size_t>(m)]) {  // (g / W) * mean scale of the bag
        const int64_t dim = L.dim[static_cast<size_t>(nb.feature)];
        ctx.device_scale_copy_rows_2d(B, nb.cols, dpooled[static_cast<size_t>(nb.feature)].device_data() + nb.col_offset,
                                      dim, sendb.device_data() + at, nb.cols, inv_w, sc.of(nb.feature));
        at += static_cast<size_t>(B * nb.cols);
      }
    s.sendb = std::move(sendb);
    sc = {};  // the scales go back to the allocator (stream order on a GPU: the kernels read them first)
    s.cross_recv = ctx.buffer("comm_buffer", static_cast<size_t>(L.nodes * B * width));  // [m][block][B x cols]
    s.cross_recv.release_host_copy();
    ctx.comm(GroupKind::cross, "grad_dist/all_to_all_cross_node", [&] {
      ctx.group(GroupKind::cross)
          .all_to_all_v_device("grad_dist/all_to_all_cross_node", s.sendb.device_data(), scount,
                               s.cross_recv.device_data(), rcount, sizeof(float));
    });
  }
  // Its second op: all-gathered in the node (the compute worker waits), into slot_grad.
  static void grad_dist_intra_node(RankContext& ctx, GradScratch& s, std::vector<DeviceBuffer<float>>& slot_grad) {
    const Layout& L = ctx.layout();
    const int64_t B = L.B;
    const CommPrecision prec = ctx.spec().qcomms.backward_precision;
    const int node = ctx.rank() / L.local;
    const auto& blocks = L.node_blocks[static_cast<size_t>(node)];
    const int64_t width = L.node_width(node);
    const bool dev = on_device(ctx);
    s.gathered = ctx.buffer("comm_buffer", static_cast<size_t>(L.local * L.nodes * B * width));  // [l][m][block][B x cols]
    if (dev) s.gathered.release_host_copy();
    std::vector<int64_t> counts(static_cast<size_t>(L.local), L.nodes * B * width);
    // the values are already rounded to `prec`: sending them in it again is exact
    ctx.comm(GroupKind::node, "grad_dist/all_gather_intra_node", [&] {
      if (dev)
        ctx.group(GroupKind::node)
            .all_gather_v_device("grad_dist/all_gather_intra_node", s.cross_recv.device_data(), s.gathered.device_data(),
                                 counts, sizeof(float));
      else
        ctx.group(GroupKind::node)
            .all_gather_q("grad_dist/all_gather_intra_node", s.cross_recv.data(), s.gathered.data(), counts, prec, nullptr);
    });
    const std::vector<size_t> slot = block_slots(L, ctx.rank(), blocks);
    size_t p = 0;
    for (int l = 0; l < L.local; ++l)
      for (int m = 0; m < L.nodes; ++m)
        for (size_t b = 0; b < blocks.size(); ++b) {
          const NodeBlock& nb = blocks[b];
          const int owner = m * L.local + l;
          const auto bytes = static_cast<int64_t>(sizeof(float)) * B * nb.cols;
          if (dev)
            ctx.device_copy(slot_grad[slot[b]].device_data() + owner * B * nb.cols, s.gathered.device_data() + p, bytes);
          else
            std::memcpy(slot_grad[slot[b]].data() + owner * B * nb.cols, s.gathered.data() + p, static_cast<size_t>(bytes));
          p += static_cast<size_t>(B * nb.cols);
        }
    if (!dev) return;
    for (const size_t k : slot)  // a shard that builds its sparse gradient on the host reads slot_grad there
      if (!ctx.slot_grad_on_device(k) && slot_grad[k].size() > 0)
        ctx.device_to_host(slot_grad[k].data(), slot_grad[k].device_data(),
                           static_cast<int64_t>(slot_grad[k].size() * sizeof(float)));
  }
};

}  // namespace

std::unique_ptr<EmbeddingSharding> table_row_wise_sharding() { return std::make_unique<TableRowWise>(); }

}  // namespace embedscope::engine::sharding
