#pragma once
// Checks on the ops of one rank that every importer makes before writing them.

#include <string>
#include <vector>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions::importers {

/// Sorts `ops` (one rank's) by (lane, start, longer first) and counts spans of one lane that
/// overlap a still open span without nesting in it, as `overlapping_spans` (severity error: they
/// are kept, busy time counts their union), the example naming the first one and `source`.
/// Cost O(n log n).
void sort_and_check_overlaps(std::vector<OpEvent>& ops, ImportProblems& problems, const std::string& source);

}  // namespace embedscope::sessions::importers
