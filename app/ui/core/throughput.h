#pragma once
// A session's throughput in its own unit (engine/workload/session_rate.h, which `embedscope
// compare` reads too), under the names the workbench's views use.

#include "embedscope/engine/workload/session_rate.h"

namespace embedscope::ui {

/// Throughput of one session: `per_s` units a second over the mean step time, `unit` "samples",
/// "tokens", or "" where the session has none (an imported trace; then per_s is 0).
using SessionThroughput = sessions::SessionRate;
using engine::lm_workload_of;
using engine::throughput_of;

}  // namespace embedscope::ui
