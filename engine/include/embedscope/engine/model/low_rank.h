#pragma once
// Low-rank (factorized) embedding tables (TableSpec::low_rank_dim): the table E (rows x dim) is
// stored as A (rows x r) times B (r x dim), both trained. The idea is ALBERT's factorized
// embedding parameterization (Lan et al. 2019, "ALBERT: A Lite BERT for Self-supervised
// Learning of Language Representations", section 3.1: V x E then E x H instead of V x H) and the
// simplest case of TT-Rec's tensor-train tables (Yin et al. 2021, one core pair). A bag pools
// its A rows and multiplies the r-vector by B once: (sum_i s A_i) B = sum_i s (A_i B).
// Stored bytes (fp32 values): 4 (rows r + r dim) instead of 4 rows dim; the optimizer keeps its
// state for A (rows x r) and for B (r x dim, B's r rows updated as dense rows every step).
// Shared by the kernels, the executor, the reference, the memory estimate and the planner.

#include <cstdint>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// Initial value of B[k][c] of a low-rank table (k in [0, r), c in [0, dim)): uniform in
/// [-sqrt(3 / r), sqrt(3 / r)), so Var(B) = 1 / r and E = A B (A initialised as an ordinary
/// table of `rows` rows and r columns, initial_weight: Var(A) = 1 / (3 rows)) has
/// Var(E) = r Var(A) Var(B) = 1 / (3 rows), the variance of DLRM's init of the full table. A
/// pure function of (seed, table, k, c), salted apart from initial_weight's streams.
float low_rank_initial_b(uint64_t seed, int table, int64_t k, int64_t c, int64_t r);

/// Fills B (r x dim, row-major) of `table` with low_rank_initial_b.
void init_low_rank_b(uint64_t seed, int table, int64_t r, int64_t dim, float* out);

/// Weight bytes of a shard of `rows` x `cols` of table t as the executor allocates them:
/// low-rank: A (rows x r) and B (r x cols) in fp32, 4 (rows r + r cols); otherwise
/// rows x row_bytes(data_type, cols) (quant/row_codec.h). Example: 1,000 x 64, r 8:
/// 4 (8,000 + 512) = 34,048 bytes instead of 256,000.
int64_t shard_weight_bytes(const TableSpec& t, int64_t rows, int64_t cols);

/// Optimizer state bytes of such a shard (kernels.h optimizer_state_bytes, in t's
/// optimizer_state_type): low-rank: the state of A (rows x r) plus that of B (r x cols).
/// Example: rowwise_adagrad, fp32, 1,000 x 64, r 8: 4 x 1,000 + 4 x 8 = 4,032 bytes.
int64_t shard_optimizer_state_bytes(OptimizerType type, const TableSpec& t, int64_t rows, int64_t cols);

/// The device buffers of such a shard, each rounded by the caching allocator separately: up to
/// two weight buffers (A, B; one when not low-rank) and up to four state buffers (momentum1 and
/// momentum2 of A, then of B). Sizes in bytes, 0 for a buffer not allocated.
struct ShardBuffers {
  int64_t weights[2] = {0, 0};
  int64_t state[4] = {0, 0, 0, 0};
};
ShardBuffers shard_buffers(OptimizerType type, const TableSpec& t, int64_t rows, int64_t cols);

}  // namespace embedscope::engine
