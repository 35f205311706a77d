#pragma once
// The vocabulary split of Megatron's VocabParallelEmbedding (megatron/core/tensor_parallel/
// layers.py, VocabUtility.vocab_range_from_global_vocab_size), generalised to a vocabulary that
// the rank count does not divide: rank r of p owns rows [floor(r V / p), floor((r+1) V / p)),
// so shard sizes differ by at most one row. Pure functions; engine/model/lm_embedding.cpp uses
// them for vocab_parallel and row_wise.
//
// Example: V = 10, p = 3: rows [0, 3), [3, 6), [6, 10); vocab_owner(5, 10, 3) = 1.

#include <cstdint>

namespace embedscope::engine {

/// A half-open row range [begin, end) of the vocabulary table.
struct VocabRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

/// Rows of rank `rank` of `world` over a vocabulary of `vocab` rows (vocab >= world >= 1,
/// 0 <= rank < world; not checked: the spec's validate() guarantees it).
inline VocabRange vocab_range(int64_t vocab, int world, int rank) {
  return {rank * vocab / world, (rank + 1) * vocab / world};
}

/// The rank whose range holds row `id` (0 <= id < vocab): ceil((id + 1) p / V) - 1, the largest
/// r with floor(r V / p) <= id. O(1).
inline int vocab_owner(int64_t id, int64_t vocab, int world) {
  return static_cast<int>(((id + 1) * world + vocab - 1) / vocab - 1);
}

/// Megatron's masking of the ids a rank does not own (VocabParallelEmbedding.forward): ids
/// outside [r.begin, r.end) are looked up as local row 0 and their output zeroed; returns the
/// local row and sets `masked`.
inline int64_t vocab_local_row(int64_t id, VocabRange r, bool& masked) {
  masked = id < r.begin || id >= r.end;
  return masked ? 0 : id - r.begin;
}

}  // namespace embedscope::engine
