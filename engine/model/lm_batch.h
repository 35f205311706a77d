#pragma once
// Internal to engine/model: one rank's batch and the state of its step between the ops of the
// lm_embedding step program (lm_embedding.h).
#include <cstdint>
#include <vector>

#include "embedscope/engine/model/lm_embedding.h"

namespace embedscope::engine {

/// A buffer of `n` int64 token ids (or token positions) in `arena` under the tag "token_ids",
/// zeroed (host memory without an arena).
inline DeviceBuffer<int64_t> lm_id_buffer(DeviceArena* arena, size_t n) {
  DeviceBuffer<int64_t> b(arena, "token_ids");
  b.assign(n, 0);
  return b;
}

struct LmRank::Batch {
  /// inputs and targets of the rank's batch, position-major (t = s B + b), int64: blocks of the
  /// rank's arena (tag "token_ids") from the input op to the step's end
  DeviceBuffer<int64_t> x, y;
  int64_t tokens = 0;         ///< B S
  int64_t local_begin = 0;    ///< first token whose row enters the body here (sequence_parallel: r T/p)
  int64_t local_count = 0;    ///< tokens whose rows enter the body here
  int64_t n_targets = 0;      ///< N: targets != padding_id in the global batch (the loss's divisor)
};

/// What one op leaves for the next ones. Every float buffer and every vector of token ids or
/// token positions is a block of the rank's arena (its peak counts them;
/// planner/lm_memory_estimate.cpp LmReplay takes and gives them at the same places, and at the
/// step's end in the reverse order of their declaration here, as the Step is destroyed); each is
/// freed by the op that reads it last, as noted. Only row_wise's splits (p counts a peer) are host
/// vectors, as TorchRec's all-to-all splits are host lists.
struct LmRank::Step {
  int64_t step = 0;
  Batch b;
  StepResult result;
  // the embedding's forward: the lookup's partial sum [T x H] (row_wise: the rows read for the
  // ids received), row_wise's input dist (elements per peer, host; the batch position of each
  // sent id in send order [T], to the step's end; the ids sent [T], freed by input_dist once
  // sent; the ids received, in receive order, to the step's end)
  DeviceBuffer<float> part;
  std::vector<int64_t> rw_send, rw_recv;
  DeviceBuffer<int64_t> rw_order, rw_sent_ids, rw_ids;
  // the embedding's output [Tl x H], the rows entering the body (the lookup's partial sum itself
  // where no collective changes its size); freed once the body has copied it into hs[0]
  DeviceBuffer<float> emb;
  // the body: hs[0..L] and th[0..L-1], (2 L + 1) [Tl x H] blocks of one buffer (freed at the
  // step's end, after end_step has read the embedding output back from hs[0]); its output z is
  // hs[L] (a view into acts)
  DeviceBuffer<float> acts;
  const float* z = nullptr;
  // the projection: gathered hidden states (row_wise / sequence_parallel) and targets (row_wise:
  // every rank's [p T], int64), the read
  // copy of O (bf16 / fp16: its rows x H 2-byte codes, lm_read_code), the logits slice
  // [Tc x rows] (then exp, then dloss/dlogits), the row max, the target's logit and the sum of
  // exps per token [Tc] each, the projection input's gradient [Tc x H]; all freed by the
  // projection's gradient collective
  DeviceBuffer<float> zg, logits, dzg;
  DeviceBuffer<uint16_t> o_read;
  DeviceBuffer<int64_t> yg;
  DeviceBuffer<float> m, pred, se;
  double loss_sum = 0;
  // the gradient of the body's output [Tl x H] (row_wise: [T x H]; the projection input's
  // gradient itself where it is all-reduced in place), freed by the body's backward; the
  // gradient of the embedding output [Tl x H], freed by the embedding's backward
  DeviceBuffer<float> dz, de;
  // the embedding's backward: the gathered gradient (sequence_parallel) or row_wise's rows'
  // gradients received
  DeviceBuffer<float> grad_rows;

  const float* hidden() const { return zg.size() ? zg.data() : z; }
  const DeviceBuffer<int64_t>& targets() const { return yg.size() ? yg : b.y; }
};

}  // namespace embedscope::engine
