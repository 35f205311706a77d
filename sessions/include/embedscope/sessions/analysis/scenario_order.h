#pragma once
// The play order of one training step: the ops of a step in the order the workbench's play
// control steps through them, and what each waited for before it could start (from the
// critical-path analysis' inferred dependencies, critical_path.h). Qt-free.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// One op of the step being played, and what it waited for before it could start.
struct PlayStep {
  OpRecord op;
  std::string waits_for;  ///< e.g. "rank 1 to join the collective (170.0 us later)"
};

/// The ops of `step` in `session` in the order a player shows them: by start time, then rank,
/// then lane (empty when the step has no ops). waits_for says what the op waited for, by
/// StepDependencies::wait_of:
///   "rank R to join the collective (D later)"                      (the peer that joined last)
///   "NAME on the LANE lane (ended D before)"                       (its rank's op that ended last)
///   "NAME on the LANE lane, which launched it (D after that op began)"
///   "nothing: it starts the step on its rank".
/// Cost: reads all ops and the step's collectives once. Throws SessionError on an unreadable file.
std::vector<PlayStep> play_order(const SessionReader& session, int64_t step);

}  // namespace embedscope::sessions
