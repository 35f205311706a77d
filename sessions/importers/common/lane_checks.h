#pragma once
// Checks on the ops of one rank that every importer makes before writing them.

#include <string>
#include <vector>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions::importers {

/// Sorts `ops` (one rank's) by (lane, start, longer first) and counts spans of one lane that
/// overlap a still open span without nesting in it, as `overlapping_spans` (severity info: they
/// are kept, busy time counts their union), the example naming the first one and `source`.
/// Cost O(n) when each lane's ops come in order, O(n log n) otherwise, plus a copy of `ops`.
void sort_and_check_overlaps(std::vector<OpEvent>& ops, ImportProblems& problems, const std::string& source);

/// Counts a GPU op that starts before the host call that launched it (same correlation id) as
/// `kernel_before_launch` (severity error: impossible on one clock, it says the trace's GPU and
/// host clocks disagree; the op is kept as recorded). Times in any one ns clock.
void count_kernel_before_launch(ImportProblems& problems, const std::string& source, int32_t rank,
                                const std::string& name, int64_t kernel_start, int64_t launch_start);

}  // namespace embedscope::sessions::importers
