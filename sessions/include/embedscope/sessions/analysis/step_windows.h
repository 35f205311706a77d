#pragma once
// Step windows and the alignment of several sessions on one step (what the workbench's
// comparison and teaching views draw on one time scale). Qt-free, tested in sessions_test.

#include <cstdint>
#include <optional>
#include <vector>

#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// The step windows of a session (steps table, in the reader's order); for a run that did not
/// complete (status != "complete"), each (step, rank) that has ops but no recorded window gets
/// the span of those ops [earliest start, latest end) ns (the step it ended in), appended in
/// (step, rank) order. Cost: one pass over all ops for an incomplete run, none otherwise.
/// Throws SessionError on an unreadable file.
std::vector<StepMetric> step_windows(const SessionReader& session);

/// Start of `step` in a session: the earliest start over ranks (ns); nullopt if it has no such
/// step.
std::optional<int64_t> step_start(const std::vector<StepMetric>& steps, int64_t step);

/// Per session, the offset (ns) that aligns `step`: drawing session i's time t at t - offset[i]
/// puts the start of `step` of every session at 0. A session without that step is aligned on
/// its first step (0 if it has none). One offset per element of `per_session`.
/// Example: A's step 1 starts at 500 ns, B's at 2000 ns -> {500, 2000}.
std::vector<int64_t> align_offsets(const std::vector<std::vector<StepMetric>>& per_session, int64_t step);

}  // namespace embedscope::sessions
