#pragma once
// `embedscope stats` notes on the steps (text): a measured step far slower than the others - a
// cold start or a stall mid-run - and, for an imported trace without profiler steps
// (RunStats::whole_trace), the heading saying the figures are over the whole trace and the top
// ops by self time.

#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::cli {

/// "" unless the slowest measured step took over 5x the median (at least 3 steps). Then one
/// indented line: a cold start when every measured step before it took over 2x the median (the
/// first measured step is one), naming the warm-up that keeps first-use costs out (metadata
/// warmup_steps; "unknown" for a trace or a session without it); else a stall mid-run after N steps
/// near the median, with the untraced time of its critical path when that is over half the step.
std::string cold_step_text(const sessions::SessionReader& session, const sessions::RunStats& st);

/// Two lines for RunStats::whole_trace: "no profiler steps: figures over the whole trace ..." ("no
/// complete profiler step: ..." where the cut left none, RunStats::whole_trace_cut) and
/// each rank's span ("trace span   rank 0 70.07 ms ...").
std::string whole_trace_text(const sessions::RunStats& st);

/// The top 15 of RunStats::top_ops as a table (op, category, self time, share of all self time,
/// count), "... and N more" below when there are more; a heading line first.
std::string top_ops_text(const sessions::SessionReader& session, const sessions::RunStats& st);

}  // namespace embedscope::cli
