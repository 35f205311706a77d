#pragma once
// The planner's memory estimate of one rank of an lm_embedding workload (workload/lm_spec.h),
// buffer by buffer as engine/model/lm_embedding.cpp and lm_sharding.cpp allocate them. Two
// figures: the breakdown below (each buffer's requested bytes, all counted as if alive at once:
// total()), and the replay of the same buffers, in the order the rank takes and gives them back,
// through the rank's caching allocator (planner/memory_replay.h AllocatorReplay, the mechanism of
// the DLRM estimate), whose peak allocated bytes are what a run's peak is compared with
// (peak_allocated_bytes: the allocator's 512 B rounding, the whole 2 MiB-rounded segment of a
// request >= 10 MiB when at most 1 MiB would be left, block reuse). Bytes; the vocabulary terms
// scale with V'/p for vocab_parallel and row_wise (the table, its gradient, and the logits slice).

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/planner/host_memory.h"
#include "embedscope/engine/sharding/vocab_parallel.h"
#include "embedscope/engine/workload/lm_spec.h"

namespace embedscope::engine {

struct LmMemoryEstimate {
  int rank = 0;
  VocabRange rows;                  ///< the vocabulary rows this rank holds
  int64_t table_bytes = 0;          ///< rows x H x 4: the fp32 master of E
  int64_t output_projection_bytes = 0;  ///< rows x H x 4 when untied, else 0
  /// bf16 / fp16: the rounded copy of the output projection (tied: of E) the logits read,
  /// rows x H x 2 (2-byte codes, model/lm_embedding.h lm_read_code); 0 for fp32.
  int64_t read_copy_bytes = 0;
  int64_t gradient_bytes = 0;       ///< fp32 gradients of E (and O): as table + output projection
  /// adam: 2 x the fp32 parameters (E, O and the body: m and v, optimizer_state); sgd: 0
  int64_t optimizer_state_bytes = 0;
  int64_t body_bytes = 0;           ///< L (H^2 + H) x 4 x 2: body weights and gradients
  /// Tc x rows x 4: the logits slice (exp and gradient computed in place), Tc = B S tokens
  /// (vocab_parallel, data_parallel) or p B S (row_wise: every rank's tokens).
  int64_t logits_bytes = 0;
  /// Hidden states of the body's L + 1 inputs and L tanh outputs on the local tokens Tl (B S;
  /// sequence_parallel B S / p), the lookup's [B S x H] partial sum (row_wise: the rows received
  /// and sent), the projection's input and gradient on Tc tokens (gathered where gathered), the
  /// embedding output and the body output's gradient where they are buffers of their own
  /// (row_wise 2 [T x H], sequence_parallel 2 [Tl x H]), the cross-entropy's row max, target
  /// logit and sum of exps (3 [Tc]), the embedding output's gradient [Tl x H] and the body's
  /// pre-activation gradient [Tl x H] (L > 0), and the token ids, int64: the batch's inputs and
  /// targets 2 [T] (row_wise also each id's batch position and the ids sent, 2 [T], the ids
  /// received, the most of the replayed steps, and every rank's targets [p T]).
  int64_t activation_bytes = 0;
  /// The replay's peak allocated bytes over the rank's steps (lm_memory_replay below): the
  /// estimate of the run's `peak allocated` (memory_counters.peak_allocated, LmRankResult).
  int64_t peak_allocated_bytes = 0;
  /// The replay's peak reserved bytes (the caching allocator's segments), >= peak_allocated_bytes.
  int64_t peak_reserved_bytes = 0;
  /// The replay's peak of requested bytes: total() less the buffers never alive with the logits
  /// (the lookup's partial sum; row_wise its rows sent and received), the run's peak_requested.
  int64_t peak_requested_bytes = 0;
  /// The buffers' requested bytes summed as if all alive at once (an upper bound of the
  /// requested peak; what lm_memory_refusal sums).
  int64_t total() const {
    return table_bytes + output_projection_bytes + read_copy_bytes + gradient_bytes + optimizer_state_bytes +
           body_bytes + logits_bytes + activation_bytes;
  }
};

/// One estimate per rank, rank order. Pure; the spec must have passed validate().
/// Example: V = 10, H = 4, S = 6, B = 1, p = 2, vocab_parallel, untied, fp32, 1 body layer:
/// rank 0 rows [0, 5): table 80, output projection 80, gradients 160, body 160, logits
/// 6 x 5 x 4 = 120, activations (2 + 1) x 6 x 4 x 4 + 96 (partial sum) + 96 (gradient of the
/// projection's input) + 3 x 6 x 4 (cross-entropy) + 96 (embedding output's gradient) + 96 (the
/// pre-activation's) + 2 x 6 x 8 (the token ids) = 840; total 1440.
/// The three peak_* fields come from lm_memory_replay(spec, rank).
std::vector<LmMemoryEstimate> estimate_lm_memory(const LmWorkloadSpec& spec);

/// The peaks of one rank's replay, bytes.
struct LmReplayedMemory {
  int64_t peak_allocated = 0, peak_reserved = 0, peak_requested = 0;
};

/// Replays rank `rank`'s buffers through a caching allocator (bookkeeping only; AllocatorReplay,
/// planner/memory_replay.h) in the order the threaded executor's LmRank takes and gives them
/// back: its parameters (E, dE, then O, dO untied; per body layer W, b, dW, db; adam's moments of
/// each), then each step's program (program/lm_program.h) op by op: the batch's token ids and
/// targets [T] int64 (input; to the step's end), row_wise's batch position of each id and the ids
/// sent [T] (bucketize), the ids received (input_dist, which gives back the ids sent; to the
/// step's end) and every rank's targets [p T] (with the gathered hidden states, freed with
/// them), the lookup's partial sum
/// [T x H] (row_wise: the rows of the ids received, then the rows returned [T x H] and the
/// embedding output in batch order [T x H], the first two freed in output_dist;
/// sequence_parallel: the embedding output [Tl x H] the reduce-scatter fills; elsewhere the
/// partial sum is the output), the body's (2 L + 1) [Tl x H] activations (the embedding output
/// freed once copied into them), the gathered hidden states [Tc x H] (row_wise,
/// sequence_parallel), the read copy (bf16 / fp16), the logits slice [Tc x rows], the
/// cross-entropy's three [Tc] vectors, the projection input's gradient [Tc x H] (all freed after
/// the projection's gradient collective, which leaves the body output's gradient: row_wise and
/// sequence_parallel a reduce-scatter's [Tl x H] output, elsewhere the gradient itself), the
/// embedding output's gradient [Tl x H] and the body's pre-activation gradient [Tl x H] (L > 0,
/// given back within body_backward, which frees the body output's gradient), the embedding
/// gradient's buffers (row_wise: [T x H] sent and the rows received; sequence_parallel: the
/// gathered [T x H]; freed with the embedding output's gradient in embedding_backward), the
/// flattened body gradients of body/grad_all_reduce (p > 1 where the body's gradients differ by
/// rank), the activations and the ids at the step's end. Every per-step vector of the run,
/// float or int64 id, is such a block (model/lm_batch.h); only row_wise's splits (p counts) are
/// not. row_wise's ids received per step are counted from the step's tokens
/// (lm_sequence_tokens, as the run draws them); the first min(steps, 8) steps are replayed
/// (later steps repeat the same buffers; row_wise's only with other id counts, whose buffers
/// are freed before the logits exist). bf16 / fp16: the read copy, and the fp32 tile the
/// projection's GEMMs convert it into (min(rows, 256) x H x 4 B, taken and given back in
/// output_projection/logits and /backward, model/lm_sharding.cpp). Throws std::out_of_range for
/// a rank outside the world. Cost: O(min(steps, 8) x (ops + row_wise's p T token draws));
/// estimate_lm_memory draws row_wise's tokens once for all its ranks (lm_rw_ids_received).
/// Example (tests/engine/planner/lm_memory_replay_test.cpp): V = 10, H = 4, S = 6, B = 1,
/// p = 2, vocab_parallel, untied, fp32, 1 body layer (estimate_lm_memory's example): every
/// buffer is under 512 B, so each takes one 512 B block; at the peak (output_projection/
/// backward) 4 parameter buffers + 4 body buffers + the token ids and targets, activations,
/// logits, the cross-entropy's three vectors and the projection input's gradient are alive:
/// 16 x 512 = 8,192 B allocated, 1 small segment of 2 MiB reserved, 480 + 96 + 288 + 120 + 72 +
/// 96 = 1,152 B requested (as in body_backward: 480 + 96 + 288 + 3 x 96).
LmReplayedMemory lm_memory_replay(const LmWorkloadSpec& spec, int rank);

/// row_wise: for each step the replay goes over (the first min(steps, 8)), the ids of the step's
/// global batch (every rank's B sequences, inputs [0, S): lm_sequence_tokens, as the run draws
/// them) whose rows each rank owns (vocab_owner over the V' rows): [step][rank], each step's
/// counts summing to p T. Empty for the other sharding types. O(min(steps, 8) x p T) token draws.
std::vector<std::vector<int64_t>> lm_rw_ids_received(const LmWorkloadSpec& spec);

/// {"ranks": [{"rank", "row_begin", "row_end", "table_bytes", ..., "total_bytes"}]}
nlohmann::json to_json(const std::vector<LmMemoryEstimate>& est);

/// The GPU-memory verdict of one configuration of an lm_embedding workload on a device of
/// `device_bytes` (a hardware profile's gpu.memory_bytes): the one check `plan --simulate`,
/// `run --simulate` and `scaling` make. A rank fits when the replay's peak reserved bytes
/// (LmMemoryEstimate::peak_reserved_bytes: the caching allocator's segments, what it must get
/// from cudaMalloc; >= peak allocated) are <= device_bytes; nothing is kept aside for the CUDA
/// context or the communicator's buffers (said in `text`). Bytes.
struct LmGpuMemoryVerdict {
  int rank = 0;                      ///< the rank with the largest peak reserved (ties: the first)
  int64_t peak_reserved_bytes = 0;   ///< that rank's
  int64_t peak_allocated_bytes = 0;  ///< that rank's
  int64_t device_bytes = 0;
  /// "" when every rank fits (or device_bytes <= 0: unknown, never refused), else the refusal
  /// (lm_gpu_memory_refusal's text)
  std::string refusal;
  bool fits() const { return refusal.empty(); }
  /// One line: "fits: rank 0 reserves 5.9 GiB at its peak (allocated 5.7 GiB) of NVIDIA ...'s
  /// 79.6 GiB, 73.7 GiB left (the CUDA context and NCCL's buffers, ~0.5-1 GiB, not counted)", or
  /// the refusal. Figures that round alike are printed to the byte.
  std::string text;
};

/// The verdict over `est` (estimate_lm_memory of a workload of sharding type `sharding`, whose
/// advice the refusal gives: data_parallel: more GPUs do not help; row_wise: fewer GPUs (its
/// gathered hidden states [p T x H] grow with p, its logits (p T) x V'/p do not shrink);
/// vocab_parallel: more GPUs split the table, its gradient and the logits). The refusal:
/// "does not fit: rank 3 needs 259.4 GiB at its peak (reserved; allocated 259.4 GiB;
/// planner/lm_memory_estimate.h: activations 256.6 GiB, logits 2.0 GiB, ...) but NVIDIA H100 80GB
/// HBM3 has 79.6 GiB; ...". Pure; O(ranks).
LmGpuMemoryVerdict lm_gpu_memory_verdict(const std::vector<LmMemoryEstimate>& est, int64_t device_bytes,
                                         const std::string& device_name, LmSharding sharding);

/// lm_gpu_memory_verdict(...).refusal: "" when it fits.
std::string lm_gpu_memory_refusal(const std::vector<LmMemoryEstimate>& estimates, int64_t device_bytes,
                                  const std::string& device_name, LmSharding sharding);
/// The same of estimate_lm_memory(spec) and spec.sharding.
std::string lm_gpu_memory_refusal(const LmWorkloadSpec& spec, int64_t device_bytes, const std::string& device_name);

/// "" when the ranks of a measured (cpu) run of `spec`, all threads of this process, fit in 90%
/// of the memory available now (`machine.available_bytes`, MemAvailable: planner/host_memory.h
/// fits_host_memory, the rule of the DLRM cpu backend, exec/host_memory_check.h; 0: unknown,
/// never refused), else the refusal, the text of the SpecError run_lm throws (tester43 F1,
/// tester45 F10: a 19.3 GiB run was let onto a 23.5 GiB machine with 2 GiB left): each rank's
/// estimate, the sum and the machine's available and total memory. Example (2 ranks of 3.0 and
/// 3.5 GiB, 7 GiB available of 8): "/devices: the cpu backend runs all 2 ranks of this
/// lm_embedding workload as threads of this process: rank 0 needs 3.0 GiB, rank 1 3.5 GiB
/// (planner/lm_memory_estimate.h), 6.5 GiB in all, but this machine has 7.0 GiB available now
/// (of 8.0 GiB; a run is refused above 90% of what is available); use fewer ranks, a smaller
/// vocab_size, hidden_size or micro batch, or --simulate PROFILE". Pure; O(ranks).
std::string lm_memory_refusal(const std::vector<LmMemoryEstimate>& est, const HostMemory& machine);

}  // namespace embedscope::engine
