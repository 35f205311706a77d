#pragma once
// The bytes a ring all-reduce moves, by rank: the one rule of the engine's collective records
// (engine comm/collective_math.h all_reduce_bytes), the plans' and simulated steps' byte
// counts, and the Kineto importer / exporter's element <-> byte conversion.

#include <cstdint>

namespace embedscope::sessions {

/// Elements of chunk `rank` when a ring all-reduce splits `count` elements over n ranks:
/// count / n, and one more for the first count % n ranks (NCCL's and Gloo's ring chunking).
/// Example: 1,024 over 3 ranks -> 342, 341, 341. 0 for n < 1 or rank outside [0, n).
inline int64_t ring_chunk_elements(int64_t count, int n, int rank) {
  if (n < 1 || rank < 0 || rank >= n || count <= 0) return 0;
  return count / n + (rank < count % n ? 1 : 0);
}

/// Bytes rank `rank` sends (and receives) in a ring all-reduce of `count` elements of
/// `elem_size` bytes over n ranks: a reduce-scatter then an all-gather of n - 1 steps each, in
/// which the rank passes on every chunk but its own, 2 (count - chunk_rank) whole elements. The
/// ranks together send exactly 2 (n - 1) x count elements, i.e. 2 (n - 1) / n of the buffer a
/// rank on average (nccl-tests' all-reduce bus-bandwidth factor, PERFORMANCE.md), per element.
/// Example: 1,024 float32 (4,096 B) over 3 ranks: rank 0 sends 2 x (1,024 - 342) x 4 = 5,456 B,
/// ranks 1 and 2 2 x 683 x 4 = 5,464 B, 16,384 B in all = 2 x 2 x 4,096. 0 for n <= 1.
inline int64_t ring_all_reduce_bytes(int64_t count, int n, int rank, int64_t elem_size) {
  if (n <= 1 || count <= 0) return 0;
  return 2 * (count - ring_chunk_elements(count, n, rank)) * elem_size;
}

/// The inverse for records that kept the bytes but not the element count: a count whose
/// ring_all_reduce_bytes(count, n, rank, elem_size) is `bytes`, or -1 if none is (bytes of an
/// older rule, n <= 1 or elem_size < 1). Two counts can give a rank the same bytes (the extra
/// element of a count % n == rank + 1 lands in its own chunk): then the one divisible by n, else
/// the smaller. Example: 5,464 B of float32 on rank 1 of 3 -> 1,024 (1,025 gives rank 1 the
/// same 5,464 B; 1,024 is not divisible by 3 either, and is the smaller).
inline int64_t ring_all_reduce_count(int64_t bytes, int n, int rank, int64_t elem_size) {
  if (n <= 1 || elem_size < 1 || rank < 0 || rank >= n || bytes < 0 || bytes % (2 * elem_size) != 0) return -1;
  const int64_t m = bytes / (2 * elem_size);  // count - chunk_rank
  // count - chunk_rank lies in [count (n - 1) / n - 1, count (n - 1) / n + 1]: count near m n / (n - 1)
  const int64_t guess = m / (n - 1) * n + m % (n - 1) * n / (n - 1);
  int64_t found = -1;
  for (int64_t c = guess > 2 ? guess - 2 : 0; c <= guess + 3; ++c) {
    if (ring_all_reduce_bytes(c, n, rank, elem_size) != bytes) continue;
    if (c % n == 0) return c;
    if (found < 0) found = c;
  }
  return found;
}

}  // namespace embedscope::sessions
