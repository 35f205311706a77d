#pragma once
// A scaling study of an lm_embedding workload (workload/lm_spec.h): the workload on simulated
// clusters of growing size, per LM sharding type (vocab_parallel, data_parallel, row_wise), each
// point the step that `plan X --simulate P --devices N --sharding T` prints (program/lm_program.h
// simulate_lm_step: the same program timed by the same cost model), with the LM memory estimate
// per GPU (planner/lm_memory_estimate.h). `embedscope scaling` prints it for an lm_embedding
// workload, as run_scaling_study's table for a DLRM one; the points can be written as the
// simulated sessions `run X --simulate P --devices N` writes (exec/lm_run.h simulate_lm).
//
// What grows with the GPUs: vocab_parallel is one tensor-parallel group, so every GPU reads the
// same micro batch of B sequences (strong scaling: tokens a step B x S whatever p; the table and
// the logits split 1/p); data_parallel and row_wise give every GPU its own micro batch (weak
// scaling: B x S x p tokens a step).

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/planner/lm_memory_estimate.h"  // lm_gpu_memory_verdict
#include "embedscope/engine/workload/lm_spec.h"

namespace embedscope::engine {

struct LmScalingStudyOptions {
  std::string hardware;                ///< hardware profile (load_hardware_profile's argument)
  /// cluster sizes, ranks, each in [1, kMaxSimulatedRanks]; run ascending, each once; a size
  /// above one node must be whole nodes (SpecError before any point runs), as the DLRM study's
  std::vector<int> gpus;
  std::vector<LmSharding> shardings;   ///< run in this order
  /// vocab_parallel's points reduce-scatter the lookup and all-gather the hidden states
  /// (Megatron's sequence parallelism); the other types never have it.
  bool sequence_parallel = false;
  int gpus_per_node = 0;               ///< node shape; 0: the profile's
  /// When not empty, each point's simulated session is written to
  /// session_dir/<sharding>_<gpus>.db (replaced only with `overwrite`: SpecError naming it
  /// before any point runs).
  std::string session_dir;
  bool overwrite = false;
  /// Set (by a SIGINT / SIGTERM handler) to stop: the points after the one running are "not run
  /// (cancelled)". May be null.
  const std::atomic<bool>* cancel = nullptr;
  /// Called with each point, in the order returned, once its efficiency is known; may be empty.
  std::function<void(const struct LmScalingPoint&)> on_point;
};

/// One (sharding type, cluster size) of an LM study. Times in ns, bytes in bytes.
struct LmScalingPoint {
  LmSharding sharding = LmSharding::vocab_parallel;
  bool sequence_parallel = false;
  int gpus = 0, nodes = 0;
  /// Why there are no figures ("" when the point ran): the workload's refusal at this size
  /// (validate: e.g. a sequence_parallel S not divisible by the GPUs), the memory refusal
  /// (lm_gpu_memory_refusal), "not run (cancelled)", or the session that could not be written.
  std::string error;
  int64_t step_time_ns = 0;            ///< LmSimulatedStep::step_ns (every simulated step is equal)
  int64_t tokens_per_step = 0;         ///< LmWorkloadSpec::tokens_per_step at this size
  double tokens_per_s = 0;             ///< tokens_per_step / step_time
  /// (tokens_per_s / gpus) / the study's baseline (lm_scaling_baseline), one baseline for every
  /// type as the DLRM study's (exec/scaling_study.h); 1 = the baseline's per-GPU rate.
  double scaling_efficiency = 0;
  /// (tokens_per_s / gpus) / the same type's per-GPU rate at its smallest size that ran:
  /// T(p0) p0 / (T(p) p) of vocab_parallel's strong scaling, the per-GPU rate ratio of the other
  /// types' weak scaling; 1 at that first size. 0 where the point did not run.
  double type_scaling_efficiency = 0;
  double comm_share = 0;               ///< rank 0's time in collectives / step time, in [0, 1]
  double embedding_comm_share = 0;     ///< of which the token embedding's own (is_lm_embedding_collective)
  /// Every rank's bytes sent to other ranks in one step, every collective (Embedscope's split
  /// checks included): what the point's session records as its collectives' bytes_sent per step.
  int64_t wire_bytes_per_step = 0;
  int64_t split_check_bytes_per_step = 0;  ///< of which Embedscope's split checks (all ranks)
  /// (wire_bytes_per_step - split_check_bytes_per_step) / tokens_per_step: `plan --simulate`'s
  /// "bytes on the wire per token" (Megatron and TorchRec run no split checks). Example (V 1000,
  /// H 16, S 32, B 2, 1 body layer, tied, fp32, 4 GPUs): vocab_parallel 4 x (2 x 6,144 + 3 x
  /// 384) / 64 = 840; data_parallel 4 x 1.5 x (64,000 + 1,088 + 4) / 256 = 1,525.6.
  double wire_bytes_per_token = 0;
  /// The stand-in body's share (program/lm_program.h LmSimulatedStep body_*: the workload's
  /// body_layers replicated fp32 dense layers, not Megatron's tensor-parallel transformer): its
  /// gradient all-reduce's bytes per token (part of wire_bytes_per_token; p > 1 where the ranks'
  /// body gradients differ: data_parallel, row_wise, vocab_parallel + sequence_parallel), and
  /// rank 0's time in its compute ops and in that all-reduce (parts of step_time_ns), ns.
  double body_wire_bytes_per_token = 0;
  int64_t body_compute_ns = 0, body_comm_ns = 0;
  /// the largest rank's LmMemoryEstimate::peak_allocated_bytes; also set on a point refused for
  /// memory (what it would need), 0 on one refused by the workload's rules or not run
  int64_t memory_bytes_per_gpu = 0;
  /// the largest rank's LmMemoryEstimate::peak_reserved_bytes (>= memory_bytes_per_gpu: the caching
  /// allocator's segments), the figure the memory check compares with the device; set where
  /// memory_bytes_per_gpu is (0 in a study file written before it was recorded)
  int64_t memory_reserved_bytes_per_gpu = 0;
  /// the profile's device memory (HardwareProfile gpu.memory_bytes), bytes: the point fits when
  /// memory_reserved_bytes_per_gpu <= it (lm_gpu_memory_verdict; 0: unknown, a study file written
  /// before it was recorded)
  int64_t device_memory_bytes = 0;
  std::string session_path;            ///< the session written, or ""
  bool write_failed = false;           ///< its session could not be written; no point runs after it
};

/// The point every scaling efficiency is relative to: among the points that ran, those of the
/// smallest GPU count, and of them the most tokens/s per GPU (ties: the first).
struct LmScalingBaseline {
  LmSharding sharding = LmSharding::vocab_parallel;
  int gpus = 0;
  double tokens_per_s_per_gpu = 0;
};
std::optional<LmScalingBaseline> lm_scaling_baseline(const std::vector<LmScalingPoint>& points);

/// Runs the study: for each type in options order, each size ascending, `spec` with world_size =
/// gpus, sharding = type (sequence_parallel for vocab_parallel when asked), timed by
/// simulate_lm_step with min(gpus, gpus per node) GPUs a node (plan's node shape), its memory
/// estimate checked against the profile's device memory. The smallest size runs for every type
/// first (and the next while none ran: the baseline), then the rest type-major; returned and
/// handed to on_point type-major, sizes ascending, each with its efficiency, as soon as the
/// points before it were.
/// Throws SpecError for an unknown profile, an empty or out-of-range gpus list, no sharding
/// type, sizes that are not whole nodes, or an existing session without `overwrite`; a point
/// refused by the workload's rules or memory is kept with its error. O(points x ranks x ops).
std::vector<LmScalingPoint> run_lm_scaling_study(const LmWorkloadSpec& spec, const LmScalingStudyOptions& options);

/// An LM study as `embedscope scaling --json` writes it.
struct LmScalingStudy {
  std::string workload, hardware;
  int gpus_per_node = 0;
  int64_t micro_batch_size = 0, sequence_length = 0, steps = 0;
  std::vector<LmScalingPoint> points;
  /// the model studied: V (unpadded rows) and H; 0 when read from a file written before they were
  int64_t vocab_size = 0, hidden_size = 0;
  /// the profile's device: memory in bytes and name (HardwareProfile gpu); 0 / "" when read from
  /// a file written before they were
  int64_t device_memory_bytes = 0;
  std::string device_name{};
};

/// {"batch_size_per_gpu": B (the micro batch each GPU reads a step; the key a study file is
/// recognised by, workload/json_kind.h), "model": "lm_embedding", "workload", "hardware",
/// "simulated": true, "gpus_per_node", "sequence_length", "steps", "vocab_size", "hidden_size",
/// "device_name", "device_memory_bytes" (the profile's GPU), "efficiency_baseline":
/// {"sharding", "gpus", "tokens_per_s_per_gpu"} or null, "points": [{"sharding", "gpus", "nodes",
/// "sequence_parallel", "device_memory_bytes", "error", "memory_bytes_per_gpu" and
/// "memory_reserved_bytes_per_gpu"? (a memory refusal's need)} or {..., "step_time_ns", "tokens_per_step", "tokens_per_s",
/// "tokens_per_s_per_gpu", "scaling_efficiency", "type_scaling_efficiency", "embedding_comm_share",
/// "comm_share", "wire_bytes_per_step", "split_check_bytes_per_step", "wire_bytes_per_token",
/// "body_wire_bytes_per_token", "body_compute_ns", "body_comm_ns",
/// "memory_bytes_per_gpu", "memory_reserved_bytes_per_gpu", "session"?}]}.
nlohmann::json to_json(const LmScalingStudy& study);

/// The inverse of to_json(const LmScalingStudy&): every key it writes is read back
/// ("efficiency_baseline" and "tokens_per_s_per_gpu", which follow from the points, are not;
/// "session", "write_failed", "memory_reserved_bytes_per_gpu", "type_scaling_efficiency" and the body_* keys are optional; so are "vocab_size", "hidden_size", "device_name"
/// and both "device_memory_bytes", which files written before them lack: 0 / ""). Times in ns, bytes in bytes, shares in [0, 1].
/// Throws SpecError "<origin>: <JSON pointer>: <reason>" for a missing or mistyped key, a
/// "model" other than "lm_embedding", a sharding type that is not an LM one (vocab_parallel,
/// data_parallel, row_wise), or gpus outside [1, kMaxSimulatedRanks].
LmScalingStudy lm_scaling_study_from_json(const nlohmann::json& j, const std::string& origin);

/// Whether `j` (a study file's JSON) is an lm_embedding study: "model": "lm_embedding".
bool is_lm_scaling_study(const nlohmann::json& j);

}  // namespace embedscope::engine
