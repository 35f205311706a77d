#pragma once
// The ops of a session that did not end (model/did_not_end.h): imported events the profiler
// never saw end, kept as zero-length ops marked "(did not end)". For `stats`, the export and the
// workbench, which show them apart from the ops that ran.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// One op that did not end.
struct DidNotEndOp {
  int32_t rank = 0;
  int32_t lane = 0;
  int64_t start_ns = 0;  ///< where the profiler saw it start, session ns (its end is unknown)
  int64_t step = 0;      ///< the step it started in (-1: none)
  std::string name;      ///< the event's own name, without the "(did not end)" mark
};

/// Every op of `session` that did not end, ordered by (rank, lane, start). Reads the ops only
/// when some string of the session carries the mark (else returns {} at the cost of one pass
/// over the names). Throws SessionError as SessionReader's reads do (a damaged file).
std::vector<DidNotEndOp> did_not_end_ops(const SessionReader& session);

}  // namespace embedscope::sessions
