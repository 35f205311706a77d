#pragma once
// A session's throughput in its own unit, without Qt: samples/s for a DLRM run, tokens/s for an
// lm_embedding run (LmWorkloadSpec::tokens_per_step, as `stats` and the Summary say), none for an
// imported trace (a profiler trace has no samples). `embedscope compare`, the Summary and the
// Compare view read it from here, so that two sessions are never compared in different units
// under one label (tester35 D7). In the engine: only the workload knows what a step holds.

#include <optional>

#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"  // SessionRate
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine {

/// The session's lm_embedding workload (meta workload_json with "model": "lm_embedding"), or none
/// (a DLRM workload, an imported trace, or a workload that no longer parses). Never throws.
std::optional<LmWorkloadSpec> lm_workload_of(const sessions::SessionReader& session);

/// The throughput of `session` whose analysis is `stats`: tokens_per_step / mean step time for an
/// lm_embedding workload; stats.samples_per_s for a DLRM run; {0, ""} for an imported trace
/// (meta imported = 1). 0 per second (in the session's unit) when the mean step time is 0.
sessions::SessionRate throughput_of(const sessions::SessionReader& session, const sessions::RunStats& stats);

}  // namespace embedscope::engine
