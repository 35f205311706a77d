#pragma once
// The flight recorder figures of `embedscope stats` (sessions/analysis/flight_recorder.h): the
// findings (opposite orders, mismatches, ranks that did not reach a collective, ranks without a
// dump), each rank's last dump, and per process group the last collective every rank completed,
// as text and as JSON.

#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/flight_recorder.h"

namespace embedscope::cli {

/// Lines ending in '\n' ("" for an empty analysis): a "flight recorder" heading, the findings,
/// a table of the ranks (dump, reason, entries, the collective each waits in) and a line per group.
std::string flight_recorder_text(const sessions::FlightAnalysis& a);

/// {"findings": [{"kind", "text", "ranks", "groups", "sequences"}],
///  "ranks": [{"rank", "dumped", "dump", "reason", "dump_time_ns", "entries", "ring_dropped",
///             "waiting": null | {"group", "sequence", "op", "name", "state", "step"},
///             "last_completed": null | {...}}],
///  "groups": [{"group", "members", "entered", "completed", "completed_everywhere",
///              "completed_everywhere_name"}]}
nlohmann::json flight_recorder_json(const sessions::FlightAnalysis& a);

}  // namespace embedscope::cli
