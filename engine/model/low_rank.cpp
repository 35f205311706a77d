#include "embedscope/engine/model/low_rank.h"

#include <cmath>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"

namespace embedscope::engine {

float low_rank_initial_b(uint64_t seed, int table, int64_t k, int64_t c, int64_t r) {
  const double bound = std::sqrt(3.0 / static_cast<double>(r));
  const uint64_t h = mix64(mix64(seed ^ (0x10ca1a2bULL + static_cast<uint64_t>(table))) +
                           mix64(static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(c)));
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  return static_cast<float>((2.0 * u - 1.0) * bound);
}

void init_low_rank_b(uint64_t seed, int table, int64_t r, int64_t dim, float* out) {
  for (int64_t k = 0; k < r; ++k)
    for (int64_t c = 0; c < dim; ++c) out[k * dim + c] = low_rank_initial_b(seed, table, k, c, r);
}

int64_t shard_weight_bytes(const TableSpec& t, int64_t rows, int64_t cols) {
  const ShardBuffers b = shard_buffers(OptimizerType::sgd, t, rows, cols);
  return b.weights[0] + b.weights[1];
}

int64_t shard_optimizer_state_bytes(OptimizerType type, const TableSpec& t, int64_t rows, int64_t cols) {
  const ShardBuffers b = shard_buffers(type, t, rows, cols);
  return b.state[0] + b.state[1] + b.state[2] + b.state[3];
}

ShardBuffers shard_buffers(OptimizerType type, const TableSpec& t, int64_t rows, int64_t cols) {
  ShardBuffers b;
  const int64_t vb = optimizer_state_value_bytes(t.optimizer_state_type);
  if (t.low_rank_dim <= 0) {
    b.weights[0] = rows * row_bytes(t.data_type, cols);
    const auto [m1, m2] = optimizer_state_floats(type, rows, cols);
    b.state[0] = m1 * vb;
    b.state[1] = m2 * vb;
    return b;
  }
  const int64_t r = t.low_rank_dim;
  b.weights[0] = 4 * rows * r;
  b.weights[1] = 4 * r * cols;
  const auto [a1, a2] = optimizer_state_floats(type, rows, r);
  const auto [b1, b2] = optimizer_state_floats(type, r, cols);
  b.state[0] = a1 * vb;
  b.state[1] = a2 * vb;
  b.state[2] = b1 * vb;
  b.state[3] = b2 * vb;
  return b;
}

}  // namespace embedscope::engine
