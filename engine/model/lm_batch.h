#pragma once
// Internal to engine/model: one rank's batch of the lm_embedding step (lm_embedding.h).
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

}  // namespace embedscope::engine
