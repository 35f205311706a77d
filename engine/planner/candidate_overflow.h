#pragma once
// How far a candidate plan that does not fit is from fitting (plan_search's NoPlanFits, search.h):
// one figure by one measure for every candidate, and words that say which measure each part of
// it is. Internal to the engine; tests/engine/planner/fixa49_overflow_test.cpp.

#include <cstdint>
#include <string>

#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/workload/enums.h"

namespace embedscope::engine::planner_detail {

/// A candidate's distance from fitting.
struct CandidateOverflow {
  /// NoPlanFits::overflow_bytes: device + host, bytes (below)
  int64_t over = 0;
  int64_t device = 0;   ///< the device part: the largest need of a rank (or a node) beyond its memory, bytes
  int64_t host = 0;     ///< the largest amount a rank's host bytes exceed devices.host_memory_bytes by
  int64_t fullest = 0;  ///< the largest hbm_bytes of a rank
  /// what binds the device part: "bytes" (a rank's estimated bytes), "allocator reserve" (a rank
  /// whose bytes fit but whose allocator's replay runs out: its reserved_bytes), "node bytes"
  /// (a cpu node's ranks together), "" when only the host part is over
  std::string measure;
  int rank = -1;        ///< the rank that binds the device part (-1: a node, or none)
  /// "N over ..." as the refusal says it (format_bytes), e.g. "1.0 MiB over in bytes on its
  /// fullest rank (rank 0)", "5.0 MiB over in the caching allocator's reserve on rank 1 (its
  /// bytes fit: 39.0 MiB of 40.0 MiB)", "83.8 MiB over in bytes on node 0 (ranks 0-3 need ...)";
  /// with a host part ", plus 2.0 MiB of host bytes over devices.host_memory_bytes on rank 2"
  std::string text;
};

/// The overflow of a candidate whose statistics are `st` on devices of `memory_bytes` (host
/// memory `host_memory_bytes` a rank), `node` its node excess (stats.h node_excess),
/// `allocator` the workload's. One measure for every candidate, so that the nearest is the one
/// of the smallest `over`: what it needs beyond the memory there is - a rank's need is its
/// estimated bytes (hbm_bytes) where they exceed the device, else the bytes its allocator reserves
/// where the replay at the capacity runs out (RankStats::reserved_bytes, set only where the bytes
/// fit), 0 else; the device part is the largest rank's, or the node's excess where larger; the
/// host part is added. Example (fixa49_overflow_test): on 40 MiB devices a candidate with a rank
/// of 41 MiB (1 MiB over in bytes) is nearer than one whose ranks hold 39 MiB but whose
/// allocator reserves 45 MiB (5 MiB over in reserve).
CandidateOverflow candidate_overflow(const PlanStats& st, int64_t memory_bytes, int64_t host_memory_bytes,
                                     const NodeExcess& node, AllocatorKind allocator);

}  // namespace embedscope::engine::planner_detail
