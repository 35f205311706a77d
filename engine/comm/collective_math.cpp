#include "embedscope/engine/comm/collective_math.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/sessions/model/ring_all_reduce.h"

namespace embedscope::engine {

namespace {
int64_t sum(std::span<const int64_t> v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }
}  // namespace

CollectiveBytes all_to_all_bytes(std::span<const int64_t> send_counts, std::span<const int64_t> recv_counts, int rank,
                                 int64_t elem_size) {
  const auto me = static_cast<size_t>(rank);
  return {(sum(send_counts) - send_counts[me]) * elem_size, (sum(recv_counts) - recv_counts[me]) * elem_size};
}

CollectiveBytes reduce_scatter_bytes(std::span<const int64_t> counts, int rank, int64_t elem_size) {
  const auto me = static_cast<size_t>(rank);
  const auto others = static_cast<int64_t>(counts.size()) - 1;
  return {(sum(counts) - counts[me]) * elem_size, others * counts[me] * elem_size};
}

CollectiveBytes all_gather_bytes(std::span<const int64_t> counts, int rank, int64_t elem_size) {
  const auto me = static_cast<size_t>(rank);
  const auto others = static_cast<int64_t>(counts.size()) - 1;
  return {others * counts[me] * elem_size, (sum(counts) - counts[me]) * elem_size};
}

CollectiveBytes all_reduce_bytes(int64_t count, int n, int rank, int64_t elem_size) {
  const int64_t b = sessions::ring_all_reduce_bytes(count, n, rank, elem_size);
  return {b, b};
}

std::optional<SplitMismatch> find_split_mismatch(std::span<const int64_t> all, int n) {
  if (n < 1 || all.size() != static_cast<size_t>(2 * n * n))
    throw std::invalid_argument(fmt::format("split check: {} counts for {} ranks (expected {})", all.size(), n, 2 * n * n));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const int64_t sent = all[static_cast<size_t>(i * 2 * n + j)];
      const int64_t expected = all[static_cast<size_t>(j * 2 * n + n + i)];
      if (sent != expected) return SplitMismatch{i, j, sent, expected};
    }
  return std::nullopt;
}

double bus_bandwidth_factor(const std::string& op, int n) {
  if (n < 1) throw std::invalid_argument(fmt::format("bus bandwidth: {} ranks", n));
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") return static_cast<double>(n - 1) / n;
  throw std::invalid_argument("bus bandwidth: unknown collective '" + op +
                              "' (all_reduce, all_gather, reduce_scatter, all_to_all)");
}

const char* dtype_name(size_t elem_size) { return elem_size == 4 ? "float32" : elem_size == 8 ? "int64" : "bytes"; }

std::string collective_head(const char* op, const char* name, const std::string& group, uint64_t sequence) {
  return fmt::format("{} '{}' (group {}, sequence {})", op, name, group, sequence);
}

WaitState poll_wait(bool event_done, bool async_error, int64_t waited_ns, int64_t timeout_ns) {
  if (event_done) return WaitState::done;
  if (async_error) return WaitState::failed;
  return waited_ns >= timeout_ns ? WaitState::timed_out : WaitState::pending;
}

int64_t poll_sleep_ns(int polls) {
  constexpr int64_t kFirst = 10'000, kMax = 1'000'000;
  return polls >= 7 ? kMax : std::min(kMax, kFirst << polls);
}

}  // namespace embedscope::engine
