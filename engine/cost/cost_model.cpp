// The cost model (cost/cost_model.h): nccl-tests' bus-bandwidth model for collectives, a
// roofline for compute ops.
#include "embedscope/engine/cost/cost_model.h"

#include "embedscope/engine/cost/dense_gemm_rate.h"

#include <algorithm>
#include <cmath>

namespace embedscope::engine {

namespace {

int64_t ns(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e9)); }

}  // namespace

double math_seconds(const ProgramOp& op, const GpuProfile& g) {
  // the GEMMs at the op's precision (fp32: dense_flops_per_s x dense_efficiency, as before)
  const double gemm_rate = dense_gemm_rate(g, op.dense_precision).flops_per_s();
  const DenseWork& w = op.dense_work;
  if (w.empty() || g.dense_interaction_ops_per_s <= 0 || g.dense_elementwise_ops_per_s <= 0)
    return static_cast<double>(op.flops) / gemm_rate;
  return static_cast<double>(w.gemm_flops) / gemm_rate +
         static_cast<double>(w.interaction_ops) / g.dense_interaction_ops_per_s +
         static_cast<double>(w.elementwise_ops) / g.dense_elementwise_ops_per_s;
}

int64_t member_collective_ns(double intra_bytes, double inter_bytes, bool spans_nodes, const HardwareProfile& hw) {
  const double lat = static_cast<double>((spans_nodes ? hw.inter_node : hw.intra_node).latency_ns) * 1e-9;
  const double intra = std::max(0.0, intra_bytes) / hw.intra_node.bus_bandwidth_bytes_per_s;
  const double inter = std::max(0.0, inter_bytes) / hw.inter_node.bus_bandwidth_bytes_per_s;
  // cpu ranks: the same cores copy every peer's bytes (cost_model.h), GPUs: NVLink and the NIC at once
  return ns(lat + (hw.cpu.cores > 0 ? intra + inter : std::max(intra, inter)));
}

bool split_check_timed(const HardwareProfile& hw) { return hw.cpu.cores > 0; }

int64_t collective_ns(const CollectiveCall& c, int rank, int gpus_per_node, const HardwareProfile& hw) {
  if (c.peers.size() <= 1) return 0;  // a group of one: no peer, no link, no latency
  if (!split_check_timed(hw) && is_split_check(c)) return 0;  // TorchRec runs no such call (tester50 F1)
  const int node = rank / gpus_per_node;
  bool spans_nodes = false;
  for (int p : c.peers) spans_nodes |= p / gpus_per_node != node;
  if (c.kind == CollectiveKind::all_reduce) {  // a ring through every member: the slowest link's busbw
    const double bytes = static_cast<double>(std::max(c.bytes_sent(), c.bytes_received()));
    return spans_nodes ? member_collective_ns(0.0, bytes, true, hw) : member_collective_ns(bytes, 0.0, false, hw);
  }
  // per-peer bytes (own slice excluded), split by the link they take
  double intra_sent = 0, intra_recv = 0, inter_sent = 0, inter_recv = 0;
  for (size_t j = 0; j < c.peers.size(); ++j) {
    if (static_cast<int>(j) == c.group_rank) continue;
    const bool same_node = c.peers[j] / gpus_per_node == node;
    const double s = j < c.send_elements.size() ? static_cast<double>(c.send_elements[j] * c.elem_bytes) : 0.0;
    const double r = j < c.recv_elements.size() ? static_cast<double>(c.recv_elements[j] * c.elem_bytes) : 0.0;
    (same_node ? intra_sent : inter_sent) += s;
    (same_node ? intra_recv : inter_recv) += r;
  }
  // cpu ranks: its sends one after the other on the machine's cores, its receives likewise, the two
  // at once (Gloo's pairs); with equal links max(sent, received) / busbw whatever the node shape
  if (hw.cpu.cores > 0)
    return std::max(member_collective_ns(intra_sent, inter_sent, spans_nodes, hw),
                    member_collective_ns(intra_recv, inter_recv, spans_nodes, hw));
  return member_collective_ns(std::max(intra_sent, intra_recv), std::max(inter_sent, inter_recv), spans_nodes, hw);
}

int64_t compute_ns(const ProgramOp& op, const HardwareProfile& hw) {
  const GpuProfile& g = hw.gpu;
  double eff = g.memory_kernel_efficiency;
  if (op.category == sessions::OpCategory::lookup) eff = g.tbe_forward_efficiency;
  else if (op.category == sessions::OpCategory::optimizer && op.rows > 0) eff = g.tbe_backward_efficiency;
  const double memory = static_cast<double>(op.bytes) / (g.hbm_bandwidth_bytes_per_s * eff);
  return g.kernel_launch_ns + ns(std::max(memory, math_seconds(op, g))) + host_work_ns(op, hw);
}

namespace {
// The profile's ns per item of host work `w` (hardware_profile.h GpuProfile); 0 for none.
double per_item_ns(HostWork w, const GpuProfile& g) {
  switch (w) {
    case HostWork::none: return 0.0;
    case HostWork::lookup_bags: return g.lookup_bag_ns;
    case HostWork::input_ids: return g.input_id_ns;
    case HostWork::bucketize_items: return g.bucketize_item_ns;
    case HostWork::update_row_lines: return g.update_line_ns;
    case HostWork::lookup_row_lines: return g.lookup_line_ns;
  }
  return 0.0;
}
}  // namespace

int64_t host_work_ns(const ProgramOp& op, const HardwareProfile& hw) {
  const auto term = [&](HostWork w, int64_t items) {
    return w == HostWork::none ? int64_t{0}
                               : std::llround(static_cast<double>(std::max<int64_t>(0, items)) * per_item_ns(w, hw.gpu));
  };
  return term(op.work, op.work_items) + term(op.work2, op.work2_items);
}

double contention_factor(const HardwareProfile& hw, int ranks_on_node) {
  if (hw.cpu.cores <= 0) return 1.0;
  const double runnable = static_cast<double>(std::max(ranks_on_node, 0)) * hw.cpu.threads_per_rank * (1.0 + hw.cpu.other_groups) +
                          hw.cpu.background_threads;
  const double x = runnable / static_cast<double>(hw.cpu.cores);
  return std::max(1.0, x) * (1.0 + hw.cpu.oversubscription_penalty * std::clamp(x - 1.0, 0.0, 1.0));
}

double sync_lag_factor(const HardwareProfile& hw, int ranks_on_node) {
  if (hw.cpu.cores <= 0) return 0.0;
  const double runnable = static_cast<double>(std::max(ranks_on_node, 0)) * hw.cpu.threads_per_rank * (1.0 + hw.cpu.other_groups) +
                          hw.cpu.background_threads;
  return runnable / static_cast<double>(hw.cpu.cores);
}

int64_t host_copy_ns(const ProgramOp& op, const HardwareProfile& hw) {
  return host_link_ns(static_cast<double>(op.bytes_h2d), static_cast<double>(op.bytes_d2h), hw);
}

int64_t host_link_ns(double bytes_h2d, double bytes_d2h, const HardwareProfile& hw) {
  const double bytes = std::max({0.0, bytes_h2d, bytes_d2h});
  return hw.host_link.latency_ns + ns(bytes / hw.host_link.bus_bandwidth_bytes_per_s);
}

int64_t half_precision_gemm_ns(const ProgramOp& op, const HardwareProfile& hw) {
  const GpuProfile& g = hw.gpu;
  if (!(g.dense_bf16_flops_per_s > 0) || !(g.dense_bf16_efficiency > 0)) return compute_ns(op, hw);
  const double memory = static_cast<double>(op.bytes) / (g.hbm_bandwidth_bytes_per_s * g.memory_kernel_efficiency);
  const double math = static_cast<double>(op.flops) / (g.dense_bf16_flops_per_s * g.dense_bf16_efficiency);
  return g.kernel_launch_ns + ns(std::max(memory, math));
}

}  // namespace embedscope::engine
