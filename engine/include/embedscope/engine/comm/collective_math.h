#pragma once
// Host-side arithmetic of the collectives, shared by the Gloo (CPU) and NCCL (GPU) paths and the
// benchmarks: bytes each rank moves, split cross-checks, nccl-tests' bus bandwidth, and the
// wait/timeout decision of a GPU collective. Pure functions; no device needed.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace embedscope::engine {

/// Bytes one rank sends to / receives from other ranks (its own slice not counted).
struct CollectiveBytes {
  int64_t sent = 0;
  int64_t received = 0;
};

/// all-to-all(v): send_counts[j] / recv_counts[j] elements of elem_size bytes to / from rank j.
CollectiveBytes all_to_all_bytes(std::span<const int64_t> send_counts, std::span<const int64_t> recv_counts, int rank,
                                 int64_t elem_size);
/// reduce-scatter as a pairwise exchange: block j (counts[j] elements) goes to rank j; this rank
/// receives counts[rank] from each of the n-1 others.
CollectiveBytes reduce_scatter_bytes(std::span<const int64_t> counts, int rank, int64_t elem_size);
/// all-gather(v): this rank's counts[rank] elements go to n-1 ranks; it receives the others'.
CollectiveBytes all_gather_bytes(std::span<const int64_t> counts, int rank, int64_t elem_size);
/// all-reduce of `count` elements over n ranks, as a ring moves it, for group rank `rank`:
/// 2 (count - its chunk) whole elements each way, chunks of count / n elements, one more for the
/// first count % n ranks (sessions/model/ring_all_reduce.h, the one rule): the ranks together
/// move 2 (n - 1) x count elements, 2 (n - 1) / n of the buffer a rank on average. Example:
/// 1,024 float32 on 3 ranks: rank 0 5,456 B, ranks 1 and 2 5,464 B each way. {0, 0} for n <= 1.
CollectiveBytes all_reduce_bytes(int64_t count, int n, int rank, int64_t elem_size);

/// A pair whose all-to-all split sizes disagree: rank `from` sends `sent` elements to rank `to`,
/// which expects `expected`.
struct SplitMismatch {
  int from = 0, to = 0;
  int64_t sent = 0, expected = 0;
};
/// `all` holds, for each of n ranks in order, its n send counts then its n receive counts
/// (n * 2n values). Returns the first pair (row-major over from, to) with send[i][j] != recv[j][i].
/// Throws std::invalid_argument when all.size() != 2 n^2.
std::optional<SplitMismatch> find_split_mismatch(std::span<const int64_t> all, int n);

/// nccl-tests' bus bandwidth factor (PERFORMANCE.md of NVIDIA/nccl-tests): busbw = algbw x
/// factor, algbw = bytes / time with bytes the per-rank buffer size nccl-tests reports
/// (all_reduce: the buffer; all_gather: the gathered output; reduce_scatter: the input;
/// all_to_all: the send buffer). all_reduce 2 (n-1)/n; all_gather, reduce_scatter and
/// all_to_all (n-1)/n. Throws std::invalid_argument for another op name or n < 1.
double bus_bandwidth_factor(const std::string& op, int n);

/// "<op> '<name>' (group <g>, sequence <n>)": how every collective error names its collective.
std::string collective_head(const char* op, const char* name, const std::string& group, uint64_t sequence);

/// The dtype of a collective record whose elements are `elem_size` bytes: "float32" (4),
/// "int64" (8), else "bytes".
const char* dtype_name(size_t elem_size);

/// Where a host wait on a GPU collective stands after one poll.
enum class WaitState { done, pending, failed, timed_out };
/// One poll: the collective's completion event fired (`event_done`), the communicator reported
/// an asynchronous error (`async_error`), `waited_ns` since the wait began. Completion wins over
/// a later error; an error before completion fails; no completion by `timeout_ns` times out.
WaitState poll_wait(bool event_done, bool async_error, int64_t waited_ns, int64_t timeout_ns);
/// Sleep before poll number `polls` (0-based): 10 us doubling to at most 1 ms, so a short
/// collective is seen within tens of microseconds and a long wait costs few runtime calls.
int64_t poll_sleep_ns(int polls);

}  // namespace embedscope::engine
