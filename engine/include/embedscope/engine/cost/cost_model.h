#pragma once
// The cost model: how long one op of a step program takes on a modelled cluster
// (hardware_profile.h). The simulated executor (exec/simulated/) times every op with it.
//
// Collectives (nccl-tests' bus-bandwidth model, github.com/NVIDIA/nccl-tests doc/PERFORMANCE.md):
// a collective of S bytes on n ranks moves (n-1)/n x S per rank for all-to-all, all-gather and
// reduce-scatter, and 2(n-1)/n x S for all-reduce (ring), at the link's bus bandwidth busbw. The
// step program already counts those bytes per rank (CollectiveCall::bytes_sent / bytes_received,
// comm/collective_math.h), so
//   t = latency + max(sent, received) / busbw
// with, for all-to-all, reduce-scatter and all-gather, the bytes to and from peers on the same
// node over the intra-node link and the rest over the rank's NIC, in parallel (the slower
// decides); an all-reduce whose group spans nodes runs at the NIC's busbw (a ring through every
// node). latency: the inter-node link's when the group spans nodes, else the intra-node link's.
//
// Compute ops (roofline): t = kernel_launch + max(bytes / (HBM bandwidth x efficiency),
// flops / (dense flop/s x dense efficiency)) (the dense op: its GEMMs, interaction and
// element-wise work at a rate each when the profile gives them, math_seconds), with the efficiency of the op's kind: TBE
// forward for lookups, TBE backward for the embedding optimizers that update rows (rows > 0),
// the memory-kernel efficiency for the rest (input, bucketize, permute, dense optimizer),
// plus host_work_ns: the per-item work of a cpu rank's kernels (bags pooled, ids made, bags and
// ids bucketized; 0 in the GPU profiles), which no byte count describes (lookup44: a row-wise
// shard on 4 cpu ranks pools 4 x B bags per slot, most empty; "input" draws and checks every id).
//
// Cpu ranks (hw.cpu.cores > 0, a calibrated `this_machine`): the ranks of a node are threads
// on its cores, so every compute op and every collective (Gloo's copies over loopback TCP run
// on the same cores) takes contention_factor times the time above (the simulated executor
// multiplies; cost/calibration.h fits the profile the same way). A collective whose members are
// all on one node is timed per call, not per member: processor sharing of the cores by its
// members' own times (cost/shared_cores.h, calib39), which is the largest member's time x
// contention_factor for a balanced call and less when small members finish first.
//
// A call's time, from its members' collective_ns: one function, cost/shared_cores.h
// collective_call_ns (calib40), used by the simulated executor, the planner's statistics
// (planner/stats.h) and the LM simulation (program/lm_program.h); compute's contention by
// contended_ns there too.
//
// Host-link ops (tables in host memory: rows and optimizer state copied over PCIe, the bytes
// from the cache model, cache_model.h): t = latency + max(h2d, d2h) / host link bandwidth
// (host_copy_ns), on their own lane (a GPU's copy engine), so that a prefetch runs under the
// dense part of the step before.

#include <cstdint>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/program/step_program.h"

namespace embedscope::engine {

/// Whether the cost model times the split-size checks (is_split_check, step_program.h) on `hw`:
/// the one rule, which collective_ns and the planner's pre-ranking (planner/prerank.h) follow.
///  - GPU profiles (hw.cpu.cores == 0, e.g. h100_sxm): no (sim50, tester50 F1). The simulation
///    predicts a TorchRec-like GPU cluster, whose input dist exchanges the splits once
///    (`input_dist/splits`) and runs its all-to-alls and reduce-scatters with known splits; the
///    check costs 0 ns, as the emulated network leaves it unpaced (network_floor.h). Before, each
///    was charged a full call (15 us on h100_sxm): 31-37% of a simulated step.
///  - cpu ranks (hw.cpu.cores > 0, a calibrated `this_machine`): yes, as any call. There the
///    simulation predicts an Embedscope cpu run, whose Gloo process group does run the check
///    (~0.1 ms at 2 ranks, docs/simulation.md "A collective's wait for a core"), and calibrate fits the
///    collective terms from sessions that hold it.
bool split_check_timed(const HardwareProfile& hw);

/// Duration in ns (>= the link latency) of collective `c` on global rank `rank`, in a cluster
/// of nodes of `gpus_per_node` ranks (rank r on node r / gpus_per_node), with the node to
/// itself. The members of a collective each get their own figure; the call's time from them is
/// cost/shared_cores.h collective_call_ns (the largest for GPUs; processor sharing on cpu nodes).
/// A collective of one member (a group of one rank: every call of a 1-GPU run) costs 0: NCCL
/// returns at once for nranks 1 (its own slice is not copied through a link), and Gloo's
/// single-member collectives copy nothing either (tester44 F3: 15 us of latency each before).
/// A split-size check costs 0 where split_check_timed(hw) is false (GPU profiles). A member of
/// an all-to-all style call: member_collective_ns of its bytes to and from peers by link (each
/// max(sent, received) on GPUs; on cpu ranks its sends and its receives timed apart, the longer).
int64_t collective_ns(const CollectiveCall& c, int rank, int gpus_per_node, const HardwareProfile& hw);

/// One member's collective time in ns with the node to itself, from its bytes (each max(sent,
/// received)) to and from peers on its own node (`intra_bytes`, over hw.intra_node) and on other
/// nodes (`inter_bytes`, over hw.inter_node), in parallel on GPUs (NVLink and the NIC):
///   t = latency + max(intra_bytes / intra busbw, inter_bytes / inter busbw), rounded to ns;
/// on cpu ranks (hw.cpu.cores > 0: emulated nodes of one machine, where Gloo copies every peer's
/// bytes over loopback on the same cores) one after the other:
///   t = latency + intra_bytes / intra busbw + inter_bytes / inter busbw,
/// so that with equal links a call takes the same time whatever the node shape (a calibrated
/// profile's links are equal unless its sessions ran over an emulated network; collective_ns
/// times a cpu member's sends and its receives this way, each, and takes the longer); the latency is
/// the inter-node link's when `spans_nodes` (the group has a member on another node), else the
/// intra-node link's. collective_ns times every member of a program's call with it;
/// the planner's pre-ranking estimate (planner/search.h) times its estimated members with it.
/// Negative bytes count as 0. Example: intra 1 B/ns, 10 us; 32 B intra, no inter, one node:
/// 10,032 ns.
int64_t member_collective_ns(double intra_bytes, double inter_bytes, bool spans_nodes, const HardwareProfile& hw);

/// Duration in ns (>= kernel_launch_ns) of compute op `op` (lane compute) on one GPU of `hw`,
/// with the node to itself (no contention_factor): launch + the roofline + host_work_ns.
int64_t compute_ns(const ProgramOp& op, const HardwareProfile& hw);

/// The math term of compute_ns's roofline, seconds (the node to itself, no launch): for the dense
/// op (op.dense_work not empty) on a profile with the non-GEMM rates (hardware_profile.h),
///   gemm_flops / R + interaction_ops / dense_interaction_ops_per_s + elementwise_ops /
///   dense_elementwise_ops_per_s;
/// otherwise op.flops / R (0 for ops without flops). R = dense_gemm_rate(g, op.dense_precision)
/// (cost/dense_gemm_rate.h): dense_flops_per_s x dense_efficiency for fp32 (every op but a dense
/// op of a tf32 / bf16 / fp16 workload), the profile's tensor-core rate for the others.
/// Example: h100_sxm, a dense op of 1e12 flops: fp32 1e12 / (67e12 x 0.5) = 29.85 ms, bf16
/// 1e12 / (989.4e12 x 0.6) = 1.6845 ms, tf32 1e12 / (494.7e12 x 0.6) = 3.369 ms.
/// Example: 1e12 flop/s at efficiency 0.5, 1e9 and 2e9 ops/s; work {1e9, 1e6, 4e6}: 2 ms + 1 ms
/// + 2 ms = 5 ms.
double math_seconds(const ProgramOp& op, const GpuProfile& g);

/// The per-item host work of compute op `op` in ns, with the node to itself (compute_ns adds it):
///   round(max(0, op.work_items) x the profile's coefficient for op.work)
///   + round(max(0, op.work2_items) x the coefficient for op.work2)
/// (HostWork::lookup_bags: hw.gpu.lookup_bag_ns, input_ids: input_id_ns, bucketize_items:
/// bucketize_item_ns, update_row_lines: update_line_ns, lookup_row_lines: lookup_line_ns;
/// none: 0). Example: a lookup of 8,192 bags at 2.5 ns a bag and 1,000 lines at 40 ns a line:
/// 20,480 + 40,000 ns.
int64_t host_work_ns(const ProgramOp& op, const HardwareProfile& hw);

/// Duration in ns of compute op `op` whose GEMMs run in bf16 / fp16 (an lm_embedding workload's
/// output projection with data_type bf16 / fp16: program/lm_program.h lm_op_gemm_in_half_precision),
/// on one GPU of `hw` with the node to itself: the same roofline as compute_ns with the math term
/// at the tensor-core rate,
///   kernel_launch_ns + max(bytes / (hbm_bandwidth x memory_kernel_efficiency),
///                          flops / (dense_bf16_flops_per_s x dense_bf16_efficiency)),
/// and exactly compute_ns(op, hw) when the profile gives no dense_bf16_flops_per_s (cpu profiles,
/// `this_machine`: the engine computes these GEMMs in fp32 on a CPU). Example (h100_sxm: 989.4
/// TFLOP/s x 0.6, 3.35 TB/s x 0.5, 5 us): the Llama-3-8B logits op of rank 0 (8 ranks), 1.0759e12
/// flops and 790.9 MB (the projection read as its 2-byte copy), takes 5 us + max(0.472 ms, 1.8126
/// ms) = 1.8176 ms (compute_ns: 32.1 ms).
int64_t half_precision_gemm_ns(const ProgramOp& op, const HardwareProfile& hw);

/// How much slower every compute op and collective runs when `ranks_on_node` ranks share a node's cores
/// (hardware_profile.h CpuContention): with x = (ranks_on_node x threads_per_rank x (1 +
/// other_groups) + background_threads) / cores, max(1, x) x (1 + oversubscription_penalty x clamp(x - 1, 0, 1)),
/// dimensionless, >= 1; exactly 1 when hw.cpu.cores is 0 (GPUs).
/// Example: cores 2, threads_per_rank 1, background 1, penalty 0: 2 ranks 1.5, 4 ranks 2.5,
/// 8 ranks 4.5; background 0, penalty 0.5: 2 ranks 1, 3 ranks 1.5 x 1.25, 4 ranks 3, 8 ranks 6;
/// other_groups 3, background 0, penalty 0: 2 ranks 4, 8 ranks 16.
double contention_factor(const HardwareProfile& hw, int ranks_on_node);

/// What a cpu rank's scheduling lag at a collective (hw.cpu.sync_lag_ns) is multiplied by on a node
/// of `ranks_on_node` ranks: x = (ranks_on_node x threads_per_rank x (1 + other_groups) +
/// background_threads) / cores, the runnable load per core of contention_factor without its
/// floor at 1 and without the oversubscription penalty (a lag is a wait for a core, not slower
/// work); 0 without a cpu block. Measured (calib38, 20 balanced row/column_wise runs at 2-8 ranks,
/// G 0-2.3): the members' lag per call over x spread 0.41 in log (over the own threads per core
/// alone, n / cores: 0.56), no trend with n.
double sync_lag_factor(const HardwareProfile& hw, int ranks_on_node);

/// Duration in ns (>= the host link's latency) of host-link op `op` (lane gpu_copy: host_fetch,
/// prefetch, host_update of tables in host memory, program/step_program.h) over hw.host_link,
/// full duplex (the two directions at the same time, each at the link's rate):
///   t = latency + max(bytes_h2d, bytes_d2h) / host_link bandwidth.
/// Example: 1,512 B host -> device over PCIe Gen5 x16 at 50 GB/s, 10 us latency: 10,000 + 30 =
/// 10,030 ns.
int64_t host_copy_ns(const ProgramOp& op, const HardwareProfile& hw);

/// The host link's time in ns for one copy of `bytes_h2d` host -> device and `bytes_d2h`
/// device -> host (the same figures as a ProgramOp's), as host_copy_ns times an op:
///   t = hw.host_link.latency_ns + round(max(bytes_h2d, bytes_d2h) / bus_bandwidth (bytes/s) x 1e9).
/// The one formula of the host link: host_copy_ns (the simulated executor, planner/stats.h)
/// and the planner's shard-level estimate (planner/search.h) both call it. Negative bytes count
/// as 0. Example: 1,512 B each way over 1 B/ns with 1 us latency: 2,512 ns.
int64_t host_link_ns(double bytes_h2d, double bytes_d2h, const HardwareProfile& hw);

}  // namespace embedscope::engine
