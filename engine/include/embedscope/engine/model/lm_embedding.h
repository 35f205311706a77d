#pragma once
// The lm_embedding model (issue 19) on one rank of p, trained with SGD or Adam (LmOptimizer):
//   e_t   = E[x_t]                                   token embedding, pooling none
//   h^0   = e,  h^{l+1} = h^l + tanh(h^l W_l + b_l)  body_layers residual dense layers, [T x H]
//   z_v   = h^L . O_v                                logits; O = E when tie_word_embeddings
//   loss  = (1/N) sum_t [log sum_v exp(z_tv) - z_{t,y_t}]   next-token cross-entropy over the
//           N targets y_t != padding_id of the global batch (y_t = the token after x_t)
// E and O are read rounded to data_type (bf16 / fp16) from an fp32 master copy; the padding
// row starts at 0 and gets no embedding gradient (torch.nn.Embedding's padding_idx).
//
// Ranks and what they hold (LmSharding, lm_spec.h):
//   vocab_parallel  rows vocab_range(V', p, r) of E (and O); every rank the same B sequences.
//                   Forward: masked local lookup, "embedding/all_reduce" [T x H]; or with
//                   sequence_parallel "embedding/reduce_scatter" to T/p tokens, the body on
//                   them, "sequence_parallel/all_gather" before the projection. Vocab-parallel
//                   cross-entropy: logits [T x V'/p] per rank, "cross_entropy/max" (all-reduce
//                   max), "cross_entropy/predicted_logit" and "cross_entropy/sum_exp"
//                   (all-reduce sum) of T floats each; full logits are never gathered.
//                   Backward: "output_projection/grad_all_reduce" of dh (sequence_parallel:
//                   "output_projection/grad_reduce_scatter"; then "body/grad_all_reduce" of the
//                   body's weights and "embedding/grad_all_gather" of de).
//   data_parallel   all of E, O and the body; rank r its own B sequences (global r B + b);
//                   "embedding/grad_all_reduce" [V' x H] (and "output_projection/grad_all_reduce",
//                   "body/grad_all_reduce"); "loss/all_reduce" of the loss sum.
//   row_wise        rows as vocab_parallel, rank r its own B sequences: "input_dist/splits",
//                   "input_dist/ids", "output_dist/rows" (all-to-alls) forward, "grad_dist/rows"
//                   backward; the projection on all-gathered hidden states
//                   ("output_projection/all_gather", p T tokens), vocab-parallel cross-entropy
//                   over them, "output_projection/grad_reduce_scatter" back; "body/grad_all_reduce".
// With data_type bf16 / fp16 the collectives of activations and of their gradients send that type's
// 2-byte elements, every value rounded (program/lm_program.h lm_wire_precision; tester55 F2); the
// cross-entropy's and the parameters' gradients' stay fp32.
// Tokens are ordered position-major within a rank's batch (t = s B + b, Megatron's [s, b, h]),
// so a sequence-parallel slice is positions [r S/p, (r+1) S/p) of every sequence.

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "embedscope/engine/memory/memory.h"
#include "embedscope/engine/sharding/vocab_parallel.h"
#include "embedscope/engine/workload/lm_spec.h"

namespace embedscope::engine {

class ProcessGroup;

/// The S + 1 tokens of global sequence `sequence` in step `step` (0-based): Zipf(alpha) over
/// [0, V) with token id = frequency rank - 1 (lm_spec.h), a pure function of (seed, step,
/// sequence), so every rank and the reference draw the same; with a token file (spec.token_file_ids)
/// the S + 1 ids from offset (step x global_sequences_per_step() + sequence) x S, wrapping around.
/// Inputs are tokens [0, S), targets [1, S].
std::vector<int64_t> lm_sequence_tokens(const LmWorkloadSpec& spec, int64_t step, int64_t sequence);

/// Initial parameters, pure functions of (seed, index) so every shard initialises alone:
/// E and O uniform in [-0.1, 0.1) (row padding_id of E zero); W_l uniform in
/// [-0.5/sqrt(H), 0.5/sqrt(H)); b_l zero. `which`: 0 = E, 1 = O, 2 + l = W_l.
float lm_initial_weight(uint64_t seed, int which, int64_t index, int64_t hidden_size);

/// `v` as the forward pass reads it: rounded to bf16 / fp16 (nearest even), unchanged for fp32.
float lm_read_weight(float v, LmDataType t);

/// The 2-byte code of `v` rounded to bf16 / fp16 (nearest even; Eigen::bfloat16 / Eigen::half
/// bits), what the read copy of the output projection stores: lm_code_value(lm_read_code(v, t),
/// t) == lm_read_weight(v, t). Examples: 1.0f -> 0x3F80 (bf16), 0x3C00 (fp16); 0.1f -> 0x3DCD
/// (bf16), 0x2E66 (fp16). Throws std::invalid_argument for fp32 (no 2-byte code).
uint16_t lm_read_code(float v, LmDataType t);
/// The value of a bf16 / fp16 code (exact in fp32). Throws std::invalid_argument for fp32.
float lm_code_value(uint16_t code, LmDataType t);

struct ProgramOp;

/// One rank's parameters and its training step. Not thread-safe: one rank at a time calls it
/// (the threaded executor calls run() from the rank's compute thread for compute ops and from
/// its comm worker for comm ops, one op at a time, in program order).
///
/// The step is the rank's StepProgram (program/lm_program.h, build_lm_step_program): begin_step,
/// then run() of every op of the program in order, then end_step. Each op is one of the
/// program's names; the model, not the executor, knows what an op does:
///   compute  input, bucketize, lookup, body_forward, output_projection/logits,
///            cross_entropy/exp, output_projection/backward, body_backward,
///            embedding_backward, optimizer
///   comm     input_dist, output_dist, embedding/all_reduce, embedding/reduce_scatter,
///            output_projection/all_gather, sequence_parallel/all_gather, cross_entropy/max,
///            cross_entropy/all_reduce, loss/all_reduce, output_projection/grad_reduce_scatter,
///            output_projection/grad_all_reduce, grad_dist, embedding/grad_all_gather,
///            grad_all_reduce (each running the collectives the program lists, on `world`)
///
/// Memory: with an `arena`, every buffer the estimate (planner/lm_memory_estimate.h) counts is a
/// block of it under a tag: "weights" (E, O and the bf16 / fp16 read copy: rows x H 2-byte
/// codes, lm_read_code), "gradients" (of E
/// and O), "dense" (body weights and their gradients), "optimizer_state" (adam: the two moments
/// of E, O and the body), "logits" (the [Tc x rows] slice, exp and
/// gradient in place), "activations" (the body's inputs and tanh outputs [Tl x H], the lookup's
/// partial sum or row_wise's rows sent and received, the gathered hidden states, the gradient
/// of the projection's input [Tc x H]), "token_ids" (the batch's int64 inputs and targets [T];
/// row_wise also the ids sent and received, the batch position of each id sent and the gathered
/// targets [p T]) and "comm_buffer" (the flattened body gradients of body/grad_all_reduce). The parameters live for the rank's lifetime; the others from the op
/// that makes them to the last op that reads them (the lookup's partial sum is freed before the
/// logits exist; the logits, the read copy, the gathered states and the projection input's
/// gradient after the projection's gradient collective; the body's activations at end_step).
/// Without an arena the same buffers are plain host memory. OomError from the arena when a
/// buffer does not fit.
class LmRank {
 public:
  /// `world` is this rank's group of spec.world_size ranks (group rank = rank). `arena` (may
  /// be null; outlives the rank) holds the rank's buffers.
  LmRank(const LmWorkloadSpec& spec, ProcessGroup& world, DeviceArena* arena = nullptr);
  ~LmRank();

  struct StepResult {
    double loss = 0;                  ///< the global batch's mean loss (the same on every rank)
    std::vector<float> embedding_out; ///< [local_tokens() x H]: the rows entering the body
    int64_t ids_looked_up = 0;        ///< ids whose row this rank read from its shard (masked ids not counted)
    int64_t unique_rows = 0;          ///< distinct rows among them
  };
  /// Starts step `step` (0-based): the step's state is reset (a step left unfinished by a
  /// failure is dropped).
  void begin_step(int64_t step);
  /// Runs one op of this rank's program of the step (build_lm_step_program(spec, rank, step)),
  /// the ops in program order. Throws std::logic_error for an op name the model does not run
  /// (or run out of order: before begin_step), CollectiveError from the collectives, OomError
  /// from the arena.
  void run(const ProgramOp& op);
  /// The step's result, after its last op (optimizer); frees the step's buffers.
  StepResult end_step();
  /// The whole step without an executor: begin_step, every op of the program on this thread,
  /// end_step.
  StepResult step(int64_t step);

  /// Rows of E this rank holds ([0, V') for data_parallel).
  VocabRange rows() const { return rows_; }
  std::vector<float> table() const { return copy(table_); }           ///< [rows x H], fp32 master (a copy)
  std::vector<float> output_projection() const { return copy(out_); } ///< [rows x H]; empty when tied (a copy)
  std::vector<std::vector<float>> body_weights() const;  ///< per layer [H x H] (in x out) (a copy)
  /// Tokens whose rows enter the body on this rank (B S; vocab_parallel with sequence_parallel B S / p).
  int64_t local_tokens() const;
  /// Token ids of this rank's batches so far (inputs; vocab_parallel: the group's batch) per
  /// row bucket of the session's id_histogram over V' rows (sessions/model/id_buckets.h:
  /// id_buckets_of(V') buckets, id_bucket_of_row).
  const std::vector<int64_t>& token_histogram() const { return histogram_; }
  /// (global sequence, position) of local token i.
  std::pair<int64_t, int64_t> token_of(int64_t i) const;

 private:
  // The step's state between ops (model/lm_batch.h). The ops are implemented in
  // lm_embedding.cpp (input, body, optimizer) and lm_sharding.cpp (the parts that differ by
  // sharding type: the embedding's forward and backward, the projection's cross-entropy, the
  // gradient all-reduces of replicated parameters).
  struct Batch;
  struct Step;
  void op_input();
  void op_bucketize();
  void op_input_dist();
  void op_lookup();
  void op_output_dist();
  void op_embedding_combine();
  void op_body_forward();
  void op_gather_hidden();
  void op_logits();
  void op_cross_entropy_max();
  void op_cross_entropy_exp();
  void op_cross_entropy_all_reduce();
  void op_projection_backward();
  void op_projection_grad_dist();
  void op_body_backward();
  void op_embedding_grad_dist();
  void op_embedding_backward();
  void op_grad_all_reduce();
  void op_optimizer();
  void count_ids(const int64_t* ids, size_t n);  // the step's ids_looked_up and unique_rows
  /// A buffer of `n` zeros in the arena under `tag` (host memory without an arena).
  DeviceBuffer<float> buffer(const char* tag, size_t n);
  static std::vector<float> copy(const DeviceBuffer<float>& b) { return {b.data(), b.data() + b.size()}; }

  LmWorkloadSpec spec_;
  ProcessGroup& pg_;
  int rank_ = 0, world_ = 1;
  int64_t vocab_ = 0, hidden_ = 0;  // V', H
  VocabRange rows_;
  DeviceArena* arena_ = nullptr;
  DeviceBuffer<float> table_, out_, g_table_, g_out_;
  std::vector<DeviceBuffer<float>> w_, b_, g_w_, g_b_;
  // adam: the first and second moments of every parameter above ("optimizer_state"), the steps taken
  DeviceBuffer<float> m_table_, v_table_, m_out_, v_out_;
  std::vector<DeviceBuffer<float>> m_w_, v_w_, m_b_, v_b_;
  int64_t adam_steps_ = 0;
  std::vector<int64_t> histogram_;
  std::unique_ptr<Step> st_;  // the step being run (null between steps)
};

}  // namespace embedscope::engine
