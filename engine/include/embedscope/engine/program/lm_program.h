#pragma once
// The step program of an lm_embedding workload (workload/lm_spec.h, model/lm_embedding.h) as
// data: per rank the ops of one training step in the order they run, each on its lane
// (compute, or comm with the collectives it runs, their element counts and bytes), with the
// flops and device-memory bytes of the compute ops and what every op waits for. Op names are
// the compute lane's span names; collective names are those the session records (model/lm_embedding.h),
// each all-to-all and reduce-scatter preceded by its "<name>/split_check" all-gather as
// ProcessGroup runs it (step_program.h ProgramOp::collectives).
//
// The ops of a step, by sharding type (Tl local tokens, Tc projected tokens, R = rows held):
//   input; [row_wise: bucketize, input_dist (splits, ids), lookup, output_dist (rows)]
//   [else: lookup, vocab_parallel: embedding/all_reduce or embedding/reduce_scatter];
//   body_forward; [row_wise / sequence_parallel: the all-gather of the hidden states];
//   output_projection/logits; [not data_parallel: cross_entropy/max]; cross_entropy/exp;
//   [not data_parallel: cross_entropy/all_reduce (predicted_logit, sum_exp)];
//   output_projection/backward; loss/all_reduce (data_parallel) or the projection's gradient
//   reduce-scatter (row_wise, sequence_parallel) or all-reduce (vocab_parallel); body_backward;
//   [row_wise: grad_dist; sequence_parallel: embedding/grad_all_gather]; embedding_backward;
//   [grad_all_reduce of replicated gradients]; optimizer.
// The threaded executor (exec/threaded/lm_executor.h) runs them in order, compute ops on the
// rank's compute thread and comm ops on its comm worker while the compute thread waits, so every
// op waits for the op issued before it; LmRank::run (model/lm_embedding.h) does what each computes.
//
// Precision on the wire (tester55 F2): with data_type bf16 / fp16 the collectives of activations
// and of their gradients move 2-byte elements of that type (lm_wire_precision), as Megatron's
// bf16 / fp16 tensors do: embedding/all_reduce, embedding/reduce_scatter,
// sequence_parallel/all_gather, output_projection/all_gather, the projection input's gradient
// (output_projection/grad_all_reduce of vocab_parallel, output_projection/grad_reduce_scatter),
// embedding/grad_all_gather, output_dist/rows and grad_dist/rows. The cross-entropy's all-reduces
// stay fp32 (Megatron computes the vocab-parallel cross-entropy in fp32), and so do the
// parameters' gradient all-reduces (body/grad_all_reduce; data_parallel's embedding/ and
// output_projection/grad_all_reduce): Megatron with bf16 all-reduces fp32 main gradients
// (accumulate_allreduce_grads_in_fp32); Embedscope keeps its gradients fp32 for fp16 too (it has
// no loss scaling). Ids, splits and targets are int64.

#include <cstdint>
#include <string_view>
#include <vector>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/workload/enums.h"
#include "embedscope/engine/workload/lm_spec.h"

namespace embedscope::engine {

/// The program of `rank` in step `step` (0-based). Counts that depend on the ids (row_wise's
/// ids and rows per peer, the ids a vocabulary shard serves) are their expectation, marked
/// exact = false: for Zipf token ids (token_zipf_alpha; id k with P ~ (k + 1)^-alpha over
/// [0, vocab_size)) a shard of rows [lo, hi) serves the share (H(hi) - H(lo)) / H(vocab_size) of
/// the ids (H = zipf_mass, input/id_share.h): rank 0 holds the frequent tokens; for ids read
/// from a file, its share of the V' rows. Example: V 4,099, alpha 1, 4 ranks of 1,025 rows:
/// rank 0 serves H(1025) / H(4099) = 0.844 of the ids, rank 1 0.078. rows of lookup / embedding_backward:
/// expected ids looked up on this rank. flops: 2 x multiply-adds (body forward 2 L Tl H^2,
/// backward twice that; logits 2 Tc R H, their backward 4 Tc R H). bytes: the buffers the op
/// reads and writes, 4 B an element but the output projection as the GEMMs read it, the bf16 /
/// fp16 read copy's 2 B with those data types: logits (Tc H + Tc R) 4 + R H e, backward
/// (2 Tc R + R H + 2 Tc H) 4 + R H e (e = 4 fp32, 2 bf16 / fp16; its fp32 gradient is the R H 4).
/// A cpu rank's random row accesses (step_program.h HostWork, look46):
/// with U the expected distinct rows of the ids the rank looks up (its rows' Zipf mass, or even
/// for a token file), the lookup's work2 is lookup_row_lines, U x ceil(H x element bytes / 64),
/// and embedding_backward's work is update_row_lines, U x ceil(4 H / 64) (the fp32 gradient rows
/// it reads and writes back); no other op has any. Throws SpecError for an invalid spec or a rank outside [0, world_size).
StepProgram build_lm_step_program(const LmWorkloadSpec& spec, int rank, int64_t step);

/// True when compute op `op` of an lm_embedding program runs its GEMMs in half precision on a
/// GPU: the output projection's ("output_projection/logits", "output_projection/backward"), which
/// read the projection weights in the spec's data_type, when that is bf16 or fp16 (the engine
/// reads them rounded to it from the fp32 master copy: model/lm_embedding.h). The body's dense
/// layers are fp32 in the engine (no rounded copy), so they stay at the fp32 rate.
/// simulate_lm_step times such ops with cost_model.h half_precision_gemm_ns, the others with compute_ns.
bool lm_op_gemm_in_half_precision(const LmWorkloadSpec& spec, const ProgramOp& op);

/// The precision of the collectives of activations and of their gradients (see the file
/// comment): data_type's (bf16 -> CommPrecision::bf16, 2 B; fp16 -> fp16, 2 B; fp32 -> fp32, 4 B).
CommPrecision lm_wire_precision(const LmWorkloadSpec& spec);

/// The load counters' bytes of a rank's lookup of `ids` token ids in its vocabulary shard
/// (sessions FORMAT.md load_counters; tester43 F2): bytes_in = ids x 8 (the int64 ids of its rows),
/// bytes_out = ids x hidden_size x the bytes of a row element as the forward reads it (data_type:
/// fp32 4, bf16 / fp16 2). Example: 1,146 ids, H 128, bf16: 9,168 B in, 293,376 B out.
struct LmLookupBytes {
  int64_t bytes_in = 0, bytes_out = 0;
};
LmLookupBytes lm_lookup_bytes(const LmWorkloadSpec& spec, int64_t ids);

/// True for the forward lookup of an lm_embedding program (the compute op "lookup", category
/// lookup; not "embedding_backward", also of category lookup): the op whose ids and time the
/// rank's load counter records (ids, lookup_ns), as a DLRM shard's pooled lookup.
inline bool is_lm_lookup_op(const ProgramOp& op) { return op.category == sessions::OpCategory::lookup && op.name == "lookup"; }

/// True for a collective of the token embedding itself (its split checks included): names
/// under "embedding/", "input_dist/", "output_dist/" or "grad_dist/" — not the output
/// projection's, the cross-entropy's or the body's. The "embedding communication" of the
/// simulated step and of `embedscope run`'s embedding comm share.
bool is_lm_embedding_collective(std::string_view name);

/// One step of every rank's program timed by the cost model on hardware `hw` (cost/cost_model.h:
/// compute_ns, collective_ns), with `gpus_per_node` ranks per node (rank r on node r /
/// gpus_per_node). Every rank issues the same ops in the same order (one thread each), so an op
/// starts when the rank has ended the one before, a collective when every rank has reached it,
/// and it lasts what the simulated executor gives the call (cost/shared_cores.h
/// collective_call_ns of the members' collective_ns: the largest member's figure for GPUs,
/// processor sharing of the node's cores for cpu ranks of one node; calib40). A compute op takes
/// compute_ns, or half_precision_gemm_ns where lm_op_gemm_in_half_precision. Compute ops on cpu
/// ranks take compute_ns x the node's contention factor (contended_ns): the static factor (every
/// rank computing at once), an estimate without a timeline; the simulated executor shares a cpu
/// node's cores among the compute ops running at each moment instead (conc46).
struct LmSimulatedStep {
  int64_t step_ns = 0;                      ///< the slowest rank's step
  int64_t comm_ns = 0;                      ///< rank 0's time in collectives (none hidden: one thread)
  int64_t embedding_comm_ns = 0;            ///< of which the embedding's ("embedding/...", input / output / grad dist)
  int64_t bytes_sent = 0;                   ///< rank 0's, to other ranks
  /// every rank's bytes to other ranks, summed (ranks differ: rank 0's rows serve the frequent
  /// tokens), Embedscope's split checks ("<name>/split_check") left out: Megatron and TorchRec
  /// do not run them (tester55 F4)
  int64_t bytes_sent_all_ranks = 0;
  /// every rank's bytes of the split checks (all-gathers of 2 n int64 counts before each
  /// all-to-all and reduce-scatter), not in bytes_sent_all_ranks
  int64_t split_check_bytes_all_ranks = 0;
  /// The stand-in body's share (the workload's body_layers replicated fp32 dense layers, not
  /// Megatron's tensor-parallel transformer, whose weight gradients are not all-reduced over the
  /// tensor-parallel group): rank 0's time in "body_forward" and "body_backward" (ns), rank 0's
  /// time in the call "body/grad_all_reduce" (ns, waiting included, as comm_ns; part of comm_ns),
  /// and every rank's bytes of that call (part of bytes_sent_all_ranks). 0 without body layers.
  int64_t body_compute_ns = 0, body_comm_ns = 0, body_bytes_all_ranks = 0;
  std::vector<int64_t> start_ns, end_ns;    ///< rank 0's ops, program order
  StepProgram program;                      ///< rank 0's
  std::vector<StepProgram> programs;        ///< every rank's
  /// [rank][op]: every rank's ops (ns from the step's start)
  std::vector<std::vector<int64_t>> rank_start_ns, rank_end_ns;
  /// [rank][k]: the k-th collective of the rank's program (ops in order, then their collectives):
  /// when the rank reached it and when it ended
  std::vector<std::vector<std::pair<int64_t, int64_t>>> collective_ns;
};
LmSimulatedStep simulate_lm_step(const LmWorkloadSpec& spec, const HardwareProfile& hw, int gpus_per_node);

}  // namespace embedscope::engine
