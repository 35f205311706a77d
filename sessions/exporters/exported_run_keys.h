#pragma once
// The run an export holds, as `embedscope import` needs it to count its steps as the run's own
// `stats` does (internal to the sessions library; tester53 F3): both exporters add these flat keys
// to their top-level "embedscope" object, which the Kineto importer reads back
// (importers/kineto_json/exported_run.h) into the import's metadata exported_run_* and pipeline.
// Flat values only: HTA's metadata reader skips nested maps inside a top-level map.
#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/recorded_run.h"
#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::sessions {

/// Adds to `info` the keys of the run `session` recorded (recorded_run): "pipeline" (its JSON
/// name; "base" when the session names none), "planned_steps" (its workload's measured steps;
/// left out when unknown), "ended" (how it ended, SessionReader::status()'s words: "complete",
/// "crashed", ...) and "end_message" ("" none). An import of a foreign trace adds none (its run is
/// unknown: the trace's import completed, which says nothing of the run); an import of an
/// Embedscope export adds the exported run's, so an export of it carries them on.
/// Example: a semi_sync run of 4 steps killed in step 2 -> {"pipeline": "semi_sync",
/// "planned_steps": 4, "ended": "crashed", "end_message": ""}.
inline void add_exported_run_keys(const SessionReader& session, nlohmann::json& info) {
  const RecordedRun run = recorded_run(session);
  if (session.meta(meta::kImported, "0") == "1" && !run.exported) return;
  info["pipeline"] = run.pipeline.empty() ? std::string("base") : run.pipeline;
  if (run.planned_steps > 0) info["planned_steps"] = run.planned_steps;
  info["ended"] = run.ended;
  info["end_message"] = run.end_message;
}

}  // namespace embedscope::sessions
