#pragma once
// Internal to engine/model: one rank's batch and the state of its step between the ops of the
// lm_embedding step program (lm_embedding.h).
#include <cstdint>
#include <vector>

#include "embedscope/engine/model/lm_embedding.h"

namespace embedscope::engine {

struct LmRank::Batch {
  std::vector<int64_t> x, y;  ///< inputs and targets of the rank's batch, position-major (t = s B + b)
  int64_t tokens = 0;         ///< B S
  int64_t local_begin = 0;    ///< first token whose row enters the body here (sequence_parallel: r T/p)
  int64_t local_count = 0;    ///< tokens whose rows enter the body here
  int64_t n_targets = 0;      ///< N: targets != padding_id in the global batch (the loss's divisor)
};

/// What one op leaves for the next ones. Buffers are freed where LmRank's comment says.
struct LmRank::Step {
  int64_t step = 0;
  Batch b;
  StepResult result;
  // the embedding's forward: the lookup's partial sum [T x H] (row_wise: the rows read for the
  // ids received), row_wise's input dist (elements per peer; the batch position of each sent id
  // in send order; the ids sent; the ids received, in receive order)
  DeviceBuffer<float> part;
  std::vector<int64_t> rw_send, rw_recv, rw_order, rw_sent_ids, rw_ids;
  // the body: hs[0..L] and th[0..L-1], (2 L + 1) [Tl x H] blocks of one buffer; its output
  DeviceBuffer<float> acts;
  std::vector<float> z;
  // the projection: gathered hidden states and targets (row_wise / sequence_parallel), the read
  // copy of O (bf16 / fp16: its rows x H 2-byte codes, lm_read_code), the logits slice
  // [Tc x rows] (then exp, then dloss/dlogits), the row max, the target's logit and the sum of
  // exps per token, the projection input's gradient [Tc x H]
  DeviceBuffer<float> zg, logits, dzg;
  DeviceBuffer<uint16_t> o_read;
  std::vector<int64_t> yg;
  std::vector<float> m, pred, se;
  double loss_sum = 0;
  std::vector<float> dz, de;  // the gradients of the body's output and of the embedding output
  // the embedding's backward: the gathered gradient (sequence_parallel) or row_wise's rows'
  // gradients received
  DeviceBuffer<float> grad_rows;

  const float* hidden() const { return zg.size() ? zg.data() : z.data(); }
  const std::vector<int64_t>& targets() const { return yg.empty() ? b.y : yg; }
};

}  // namespace embedscope::engine
