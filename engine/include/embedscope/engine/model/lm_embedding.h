#pragma once
// The lm_embedding model (issue 19) on one rank of p, trained with plain SGD:
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
// Tokens are ordered position-major within a rank's batch (t = s B + b, Megatron's [s, b, h]),
// so a sequence-parallel slice is positions [r S/p, (r+1) S/p) of every sequence.

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "embedscope/engine/memory/memory.h"
#include "embedscope/engine/sharding/vocab_parallel.h"
#include "embedscope/engine/workload/lm_spec.h"

namespace embedscope::engine {

class ProcessGroup;

/// The S + 1 tokens of global sequence `sequence` in step `step` (0-based): Zipf(alpha) over
/// [0, V) with token id = frequency rank - 1 (lm_spec.h), a pure function of (seed, step,
/// sequence), so every rank and the reference draw the same. Inputs are tokens [0, S), targets [1, S].
std::vector<int64_t> lm_sequence_tokens(const LmWorkloadSpec& spec, int64_t step, int64_t sequence);

/// Initial parameters, pure functions of (seed, index) so every shard initialises alone:
/// E and O uniform in [-0.1, 0.1) (row padding_id of E zero); W_l uniform in
/// [-0.5/sqrt(H), 0.5/sqrt(H)); b_l zero. `which`: 0 = E, 1 = O, 2 + l = W_l.
float lm_initial_weight(uint64_t seed, int which, int64_t index, int64_t hidden_size);

/// `v` as the forward pass reads it: rounded to bf16 / fp16 (nearest even), unchanged for fp32.
float lm_read_weight(float v, LmDataType t);

/// One op this rank ran (for the timeline): name, comm lane or compute, steady-clock ns.
struct LmOpSpan {
  const char* name = "";
  bool comm = false;
  int64_t start_ns = 0, end_ns = 0;
  int64_t step = 0;
};

/// One rank's parameters and its training step. Not thread-safe; one per rank thread.
///
/// Memory: with an `arena`, every buffer the estimate (planner/lm_memory_estimate.h) counts is a
/// block of it under a tag: "weights" (E, O and the bf16 / fp16 read copy), "gradients" (of E
/// and O), "dense" (body weights and their gradients), "logits" (the [Tc x rows] slice, exp and
/// gradient in place), "activations" (the body's inputs and tanh outputs [Tl x H], the lookup's
/// partial sum or row_wise's rows sent and received, the gathered hidden states, the gradient
/// of the projection's input [Tc x H]) and "comm_buffer" (the flattened body gradients of
/// body/grad_all_reduce). The parameters live for the rank's lifetime; the others for the part
/// of the step that uses them. Without an arena the same buffers are plain host memory.
/// OomError from the arena when a buffer does not fit.
class LmRank {
 public:
  /// `world` is this rank's group of spec.world_size ranks (group rank = rank). `clock_ns`
  /// (may be empty) timestamps the op spans reported to `on_op` (may be empty). `arena` (may
  /// be null; outlives the rank) holds the rank's buffers.
  LmRank(const LmWorkloadSpec& spec, ProcessGroup& world, std::function<int64_t()> clock_ns = {},
         std::function<void(const LmOpSpan&)> on_op = {}, DeviceArena* arena = nullptr);

  struct StepResult {
    double loss = 0;                  ///< the global batch's mean loss (the same on every rank)
    std::vector<float> embedding_out; ///< [local_tokens() x H]: the rows entering the body
    int64_t ids_looked_up = 0;        ///< ids whose row this rank read from its shard (masked ids not counted)
    int64_t unique_rows = 0;          ///< distinct rows among them
  };
  /// Runs step `step` (forward, backward, SGD) and returns its loss and embedding output.
  /// Throws CollectiveError from the collectives.
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
  // implemented in lm_embedding.cpp; the mode-specific parts in lm_sharding.cpp
  struct Batch;
  void embed_forward(const Batch& b, std::vector<float>& e);
  void embed_backward(const Batch& b, std::vector<float>& de);
  double project_loss(const Batch& b, const std::vector<float>& z, std::vector<float>& dz);
  void all_reduce_grads();
  void span(const char* name, bool comm, int64_t start);
  int64_t now() const { return clock_ ? clock_() : 0; }
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
  std::function<int64_t()> clock_;
  std::function<void(const LmOpSpan&)> on_op_;
  int64_t step_ = 0;
  int64_t ids_ = 0, unique_ = 0;  // of the step's lookup
  std::vector<int64_t> histogram_;
  // row_wise: the step's input dist, kept for the backward pass (elements per peer; the batch
  // position of each sent id in send order; the ids this rank received, in receive order)
  std::vector<int64_t> rw_send_, rw_recv_, rw_order_, rw_ids_;
};

}  // namespace embedscope::engine
