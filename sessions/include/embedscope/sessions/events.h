#pragma once
// Event records shared by the engine, the collectors and (with the session issue) the SQLite
// session file. Timestamps are integer nanoseconds on one steady clock per run, measured from
// the run's start (the clock anchor is recorded beside them).

#include <cstdint>
#include <string>

namespace embedscope::sessions {

/// What an op spends its time on; the same categories colour every view.
enum class OpCategory : uint8_t { input, lookup, comm, dense, optimizer, memcpy, other };

/// Lanes of a CPU rank: the compute worker and the comm worker (threads).
enum class Lane : uint8_t { compute = 0, comm = 1 };

const char* to_string(OpCategory c);
const char* to_string(Lane l);

/// One op span on a rank's lane. `name` points to a string with static storage duration
/// (op names are literals), so recording a span never allocates.
struct OpEvent {
  int32_t rank = 0;
  Lane lane = Lane::compute;
  OpCategory category = OpCategory::other;
  const char* name = "";
  int64_t step = 0;       ///< training step (warmup steps are negative: -warmup..-1)
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t bytes = 0;      ///< bytes sent + received by a collective, 0 otherwise
  uint64_t correlation = 0;  ///< collective sequence number within its group, 0 otherwise
};

}  // namespace embedscope::sessions
