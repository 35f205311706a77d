#pragma once
// How a run ended, in words that agree with its step count (ux41 #9: a crashed run read
// "(crashed, measured)" and then "0 measured steps"). `embedscope stats` and `embedscope
// compare` head their output with it.

#include <string>

#include "embedscope/sessions/analysis/analysis.h"

namespace embedscope::sessions {

/// RunStats::ended, with where the run stopped when it did not complete (the last measured step
/// with ops: RunStats::critical_paths):
///   complete                                  "complete"
///   no measured step, ops in step 3           "crashed in step 3; no step completed"
///   no measured step, no ops in one           "crashed before its first measured step"
///   4 measured steps, ops in step 4           "oom in step 4, after 4 measured steps"
///   4 measured steps, no ops after them       "cancelled after 4 measured steps"
/// An imported trace's "complete" stays "complete". Never throws except std::bad_alloc.
std::string ended_text(const RunStats& st);

/// ended_text for the end `ended` in place of RunStats::ended (the exported run's end of an
/// import: RunStats::exported_run_ended): "crashed after 37 measured steps".
std::string ended_text(const RunStats& st, const std::string& ended);

/// An import of an Embedscope export (RunStats::exported_run_ended set; tester53 F3): how the
/// exported run ended, as its own `stats` says it, with its pipeline, planned steps and end
/// message, and that the import itself completed; "" for any other session. Example:
/// "the exported run (semi_sync pipeline, 3000 planned steps) ended crashed after 37 measured
/// steps; this import completed".
std::string exported_run_text(const RunStats& st);

}  // namespace embedscope::sessions
