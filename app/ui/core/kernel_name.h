#pragma once
// The workbench's use of the sessions library's short kernel names (analysis/kernel_name.h).

#include "embedscope/sessions/analysis/kernel_name.h"

namespace embedscope::ui {
using sessions::distinct_short_kernel_names;
using sessions::short_kernel_name;
}  // namespace embedscope::ui
