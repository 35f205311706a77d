#pragma once
// Hardware profiles: the GPU, node shape and links of a modelled cluster, read from JSON
// (resources/hardware/*.json, embedded at build time, or a file given by path). The simulated
// executor (exec/simulated/) times every op of a step program with them (cost_model.h). Every
// number in a built-in profile has its source beside it in the file's "sources" object (a JSON
// pointer -> citation); numbers that are assumptions say so there.
//
// Profile JSON (all fields required unless marked):
//   {"name": "h100_sxm", "description": "...",
//    "gpu": {"name", "memory_bytes", "hbm_bandwidth_bytes_per_s", "dense_flops_per_s",
//            "dense_efficiency", "tbe_forward_efficiency", "tbe_backward_efficiency",
//            "memory_kernel_efficiency", "kernel_launch_ns",
//            "dense_interaction_ops_per_s", "dense_elementwise_ops_per_s" (optional, both or neither),
//            "lookup_bag_ns", "input_id_ns", "bucketize_item_ns", "update_line_ns",
//            "lookup_line_ns" (each optional, default 0),
//            "dense_bf16_flops_per_s" (optional), "dense_bf16_efficiency" (optional; required
//            with dense_bf16_flops_per_s), "dense_tf32_flops_per_s" (optional),
//            "dense_tf32_efficiency" (optional; required with dense_tf32_flops_per_s)},
//    "cluster": {"gpus_per_node", "max_nodes"},
//    "intra_node": {"name", "bus_bandwidth_bytes_per_s", "latency_ns"},
//    "inter_node": {"name", "bus_bandwidth_bytes_per_s", "latency_ns"},
//    "host_link": {"name", "bus_bandwidth_bytes_per_s", "latency_ns"},   (optional: see host_link)
//    "cpu": {"cores", "threads_per_rank", "background_threads",
//            "oversubscription_penalty" (optional), "other_groups" (optional),
//            "handoff_ns" (optional), "sync_lag_ns" (optional), "call_wait_ns" (optional)},   (optional: see CpuContention)
//    "sources": {"/gpu/memory_bytes": "...", ...}}   (optional)

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace embedscope::engine {

/// A link class between GPUs: NVLink / PCIe within a node, the NIC across nodes.
struct LinkProfile {
  std::string name;                     ///< e.g. "NVLink 4 (NVSwitch)"
  /// NCCL bus bandwidth (nccl-tests' busbw: the per-rank link rate a large collective
  /// achieves, independent of the rank count), bytes/s, > 0.
  double bus_bandwidth_bytes_per_s = 0;
  int64_t latency_ns = 0;               ///< fixed cost of one collective over this link, ns, >= 0
};

/// One GPU model and what its kernels achieve.
struct GpuProfile {
  std::string name;                     ///< e.g. "NVIDIA H100 80GB HBM3"
  int64_t memory_bytes = 0;             ///< device memory, bytes, > 0
  double hbm_bandwidth_bytes_per_s = 0; ///< peak device-memory bandwidth, bytes/s, > 0
  /// Peak fp32 flop/s of the dense layers' GEMMs (CUDA cores, no tensor cores), > 0: the rate of
  /// dense.precision fp32 (cost/dense_gemm_rate.h has the rate of each precision).
  double dense_flops_per_s = 0;
  /// Fractions in (0, 1] of the peaks above that the kernels achieve: the dense GEMMs, the
  /// TBE forward (pooled lookup), the TBE backward with its fused optimizer, and the small
  /// memory-bound kernels (input, bucketize, permute, dense optimizer).
  double dense_efficiency = 0, tbe_forward_efficiency = 0, tbe_backward_efficiency = 0, memory_kernel_efficiency = 0;
  int64_t kernel_launch_ns = 0;         ///< fixed cost of one compute op, ns, >= 0
  /// The dense op's work outside its GEMMs (model/dense_work.h), each at its own rate (JSON
  /// optional, both or neither; > 0 when given): the dot interaction's multiply-adds per second
  /// and the element-wise floats written per second. Given, the dense op's math is
  ///   gemm_flops / (dense_flops_per_s x dense_efficiency) + interaction_ops / this rate
  ///   + elementwise_ops / that rate;
  /// absent (0, the built-in GPU profiles), op.flops / (dense_flops_per_s x dense_efficiency)
  /// as before (all of the op at the GEMM rate). `embedscope calibrate` measures their ratios
  /// to the GEMM rate with a microbenchmark of the engine's dense code (cost/dense_microbench.h)
  /// and fits the scale to the sessions (issue 15, dense44).
  double dense_interaction_ops_per_s = 0, dense_elementwise_ops_per_s = 0;
  /// Per-item host work (cost_model.h host_work_ns; ProgramOp::work_items, program/step_program.h
  /// HostWork), ns per item, >= 0, JSON optional, default 0. A cpu rank's kernels pay per bag and
  /// per id beyond the bytes they move (a loop iteration, an output row zeroed, a random draw):
  ///   lookup_bag_ns      per bag pooled by "lookup", empty bags included (a row-wise shard
  ///                      pools the W x B bags of every rank, most of them empty);
  ///   input_id_ns        per id of the rank's batch made and checked by "input";
  ///   bucketize_item_ns  per bag and per id "bucketize" scans (once per destination slot);
  ///   update_line_ns     per 64-byte cache line "backward_fused_optimizer" updates: its
  ///                      distinct rows x (the lines of a row + the lines of its optimizer
  ///                      state), HostWork::update_row_lines. A cpu rank's row update is a
  ///                      random access into the table per distinct row (a cache and TLB miss
  ///                      in a table larger than the caches), paid per line touched whatever
  ///                      share of the line the row uses: a column-wise shard of 4 columns
  ///                      (16 B) costs the same line as a row-wise shard's 16 columns (64 B),
  ///                      so bytes undercount narrow rows (opt45: criteo_kaggle cw4, 11.5k
  ///                      distinct rows a rank, 7.4 ms measured against 0.8 ms from bytes);
  ///   lookup_line_ns     per 64-byte cache line "lookup" reads at a random place: its local
  ///                      shards' distinct rows x the lines of a stored row, HostWork::
  ///                      lookup_row_lines (the op's second term, ProgramOp::work2). Same
  ///                      cause as update_line_ns: a 16 B row costs a line (look46: cw4's
  ///                      lookup 1.60 ms measured against 0.37 ms from bytes); a row named
  ///                      again in the batch is in cache, so distinct rows, not ids.
  /// calibrate fits them (calibration.h). The built-in GPU profiles leave them 0: FBGEMM's TBE
  /// forward runs a warp per bag in parallel, so its per-bag cost is inside the measured
  /// tbe_forward_efficiency, and a GPU trainer's input and bucketize are a data loader's and
  /// a bandwidth-bound kernel's (memory_kernel_efficiency), not per-item host loops; FBGEMM's
  /// TBE backward's row updates are inside its measured tbe_backward_efficiency, and its
  /// forward's row reads inside tbe_forward_efficiency.
  double lookup_bag_ns = 0, input_id_ns = 0, bucketize_item_ns = 0, update_line_ns = 0, lookup_line_ns = 0;
  /// Peak dense (no structured sparsity) tensor-core flop/s of bf16 / fp16 GEMMs (the two run at
  /// the same rate on A100 / H100 / H200), > 0; 0 when the profile does not give one (JSON
  /// optional: a cpu profile, `this_machine`, a calibration's profile): such a profile times
  /// half-precision GEMMs at dense_flops_per_s x dense_efficiency, as the engine computes them
  /// in fp32 on a CPU (cost_model.h half_precision_gemm_ns).
  double dense_bf16_flops_per_s = 0;
  /// Fraction in (0, 1] of dense_bf16_flops_per_s that large bf16 / fp16 GEMMs achieve; 0 when
  /// dense_bf16_flops_per_s is absent (JSON: required with it, refused without it). The rate of
  /// an lm_embedding workload's bf16 / fp16 output projection and of dense.precision bf16 / fp16.
  double dense_bf16_efficiency = 0;
  /// Peak dense (no structured sparsity) tensor-core flop/s of TF32 GEMMs (fp32 operands rounded
  /// to 10 mantissa bits), > 0; 0 when the profile does not give one (JSON optional): such a
  /// profile times dense.precision tf32 at dense_flops_per_s x dense_efficiency and says so
  /// (cost/dense_gemm_rate.h). Built in: A100 SXM 156e12, H100 / H200 SXM 494.7e12 (NVIDIA's
  /// datasheets; their 312 / 989 TFLOPS figures are with sparsity).
  double dense_tf32_flops_per_s = 0;
  /// Fraction in (0, 1] of dense_tf32_flops_per_s that the GEMMs achieve; 0 when it is absent
  /// (JSON: required with it, refused without it).
  double dense_tf32_efficiency = 0;
};

/// Ranks that are threads sharing a node's CPU cores (the cpu backend: `this_machine`), absent
/// (cores 0) for GPUs, which do not share. A compute op on a node of n ranks takes
///   x = (n x threads_per_rank x (1 + other_groups) + background_threads) / cores,
///   contention_factor = max(1, x) x (1 + oversubscription_penalty x min(1, max(0, x - 1)))
/// times its cost-model time (cost_model.h): the processor sharing of a fair scheduler (every
/// runnable thread gets an equal share of the cores), plus what time slicing costs once there
/// are more runnable threads than cores (context switches, caches refilled), ramped in between
/// one and two threads per core. Example: 8 ranks, 1 thread each, 1.5 background threads on 2
/// cores, penalty 0.2: x = 4.75, factor 4.75 x 1.2 = 5.7.
/// other_groups G: Linux's scheduler with autogroup (CONFIG_SCHED_AUTOGROUP, on by default:
/// /proc/sys/kernel/sched_autogroup_enabled; sched(7) "The autogroup feature") shares the CPU
/// fairly between task groups (one per session), not between threads: with G other groups
/// keeping their share busy, this process gets cores / (1 + G) whatever its thread count, so
/// its n x threads_per_rank threads run (1 + G) times more crowded than on an idle machine
/// (measured here under load: the process got 0.37-0.61 of 2 cores at 2, 4 and 8 ranks alike).
/// Example: 8 ranks on 2 cores, G = 3, no background: x = 8 x 4 / 2 = 16.
struct CpuContention {
  int cores = 0;                  ///< cores of a node, >= 0; 0: no contention (GPU profiles)
  double threads_per_rank = 1;    ///< runnable threads a computing rank keeps busy, > 0
  double background_threads = 0;  ///< runnable threads of other work on the node, >= 0
  /// Extra fraction of time when oversubscribed (JSON optional, default 0), >= 0.
  double oversubscription_penalty = 0;
  /// Other task groups sharing the cores with this process's group (JSON optional, default 0),
  /// >= 0: the process gets cores / (1 + other_groups) of them (see above).
  double other_groups = 0;
  /// Cross-thread hand-off (JSON optional, default 0), ns >= 0, before contention: a cpu rank
  /// runs its compute ops and its collectives on two threads (exec/threaded/executor.cpp), and an
  /// op that waits for an op of the other lane starts only once its thread has been woken and
  /// scheduled. The simulator starts such an op at max(its lane free, each dependency's end +
  /// handoff_ns x contention_factor for a dependency on another lane) (exec/simulated/). Measured
  /// here (calib15e, tw4 at G 1.33): ~8 ms a step of 140 in such gaps, 0.4-3.3 ms each, none
  /// between ops of one lane; calibrate fits it from the gaps (calibration.h).
  int64_t handoff_ns = 0;
  /// Scheduling lag at a collective (JSON optional, default 0), ns >= 0, before contention: each
  /// member's arrival at a collective is delayed by max(0, E - sync_lag_ns x f), E an exponential
  /// draw of mean sync_lag_ns x f (f = sync_lag_factor, cost_model.h: runnable threads per core,
  /// in the simulator with the compute ops running on the node at the arrival plus the arriving
  /// thread counted as ranks, shared_cores.h ComputeSharing::running_at, conc46: at 8 ranks on 2
  /// cores most ranks wait in collectives when others arrive, the static 8 / 2 = 4 doubled the
  /// lag of tw8 against measured) from a seeded hash of (rank, iteration, op, collective):
  /// deterministic (exec/simulated/).
  /// The op durations are medians, so a member is late by what its lag exceeds the typical one;
  /// a collective starts at its last member's arrival, so a call waits for the maximum of n such
  /// delays (members' mean wait for the last, in units of the mean: 0.30 at 2 ranks, 0.76 at 4,
  /// 1.35 at 8), and less where one member is late anyway (an imbalanced plan): the stochastic
  /// slowest member. Measured (calib38): members' mean wait per call 0.1-6.9 ms at 2-8 ranks on 2
  /// cores; calibrate fits it to the sessions' mean member wait per call (calibration.h).
  double sync_lag_ns = 0;
  /// A collective call's wait for a core on an oversubscribed node (JSON optional, default 0), ns
  /// >= 0, not scaled by contention: every call of two or more members on cpu ranks takes
  /// call_wait_ns x clamp(x - 1, 0, 1) more (x = runnable threads per core, cost_model.h
  /// sync_lag_factor; shared_cores.h collective_call_ns). A Gloo member blocks in a receive and
  /// is woken by the transport; with a core free (x <= 1) it runs at once, on a node whose every
  /// core is busy it first waits for one (the scheduler preempts on wake-up, so the wait is about a
  /// slice's remainder, not one per runnable thread: it saturates, like the penalty). Measured
  /// (coll45, cal44b idle sets, 2 cores): 2-rank calls of 32 B took 0.10 ms (median) / 0.2 ms
  /// (mean), 4-rank ones 0.5-1.5 / 1.1-2.6 ms: the calls' latency grew 5-10x from 2 to 4 ranks
  /// where the contention factor grew 2.35x; a per-call latency x the factor fitted at 4 ranks
  /// over-predicted the 2-rank runs' collectives 2-3x. calibrate fits it (calibration.h).
  int64_t call_wait_ns = 0;
};

struct HardwareProfile {
  std::string name;         ///< the built-in name or the file's "name"
  std::string description;
  GpuProfile gpu;
  int gpus_per_node = 1;    ///< the node shape, > 0
  int max_nodes = 1;        ///< the largest cluster the profile describes, > 0
  LinkProfile intra_node, inter_node;
  /// The link between a GPU and its host's memory (PCIe): bus_bandwidth_bytes_per_s is what a
  /// copy achieves in ONE direction (the link is full duplex: host -> device and back run at the
  /// same time), latency_ns the fixed cost of one copy. Times the gpu_copy ops of tables in
  /// host memory (cost_model.h host_copy_ns). Absent in a profile file (and in a profile built
  /// in code, e.g. a calibration's): default_host_link()'s figures.
  LinkProfile host_link{"PCIe Gen4 x16 (assumed: the profile gives no host_link)", 25e9, 10000};
  /// Profile JSON "cpu" (optional): ranks sharing a node's cores; absent = no contention.
  CpuContention cpu;
  std::map<std::string, std::string> sources;  ///< JSON pointer -> citation
  /// JSON "fit_quality" (optional): how well a calibrated profile fitted its sessions (embedscope
  /// calibrate: each fitted rate's points, parameters and R^2, the fitted values at their search
  /// bound, the checks' step-time errors, the warnings), kept as the object's JSON text for
  /// cost/profile_trust.h to read; empty when absent (built-in and hand-written profiles).
  std::string fit_quality_json;
};

/// The host link of a profile that does not give one: PCIe Gen4 x16, 25 GB/s a direction
/// achieved (32 GB/s nominal; assumption, the lower of the two generations in the built-in
/// profiles), 10 us a copy.
LinkProfile default_host_link();

/// Parses a profile. `origin` names the text in errors. Throws SpecError
/// "ORIGIN: /gpu/hbm_bandwidth_bytes_per_s: missing" (or "must be > 0, got -1", "unknown key
/// \"x\"", "/name: must not be empty ..." for a name of blanks only) naming the JSON pointer; a
/// JSON syntax error names the byte.
HardwareProfile parse_hardware_profile(const std::string& json_text, const std::string& origin);

/// Whether load_hardware_profile reads `name_or_path` as a file: it contains '/', ends in
/// ".json", or names an existing file (not a directory) that is not a built-in profile's name (a
/// built-in name is the built-in whatever files sit in the folder; "./h100_sxm" reads the file).
bool hardware_profile_is_file(const std::string& name_or_path);

/// A profile JSON file when hardware_profile_is_file(name_or_path), else a built-in profile by
/// name. Throws SpecError "/devices/hardware: unknown hardware profile \"x\" (built in:
/// a100_sxm_80gb, h100_sxm, h200_sxm; or give a profile JSON file)"; for a directory
/// "/devices/hardware: \"d\" is a directory, not a hardware profile file (built in: ...)"; for a
/// file path to nothing or a link that cannot be resolved "/devices/hardware: \"x.json\" cannot be
/// opened as a hardware profile file: No such file or directory (built in: ...)" (the errno
/// text: "Too many levels of symbolic links", ...); for a file that is another
/// of embedscope's JSON files (json_kind.h) "sc.json is a scaling study (embedscope scaling
/// --json), not a hardware profile (...)"; else what parse_hardware_profile throws (with the
/// file name as origin).
HardwareProfile load_hardware_profile(const std::string& name_or_path);

/// The built-in profiles' names, sorted.
std::vector<std::string> hardware_profile_names();

}  // namespace embedscope::engine
