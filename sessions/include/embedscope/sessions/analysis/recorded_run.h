#pragma once
// The run whose steps a session holds, as far as counting its steps needs it (counted_steps.h):
// its pipeline, its planned measured steps and how it ended. For a session Embedscope ran these
// are the session's own (metadata pipeline, workload_json "steps", SessionReader::status()); for
// the import of an Embedscope export they are the exported run's, which the export carries and
// the import records (metadata exported_run_*: tester53 F3 - the import read "complete" with no
// pipeline, so `stats` counted a semi_sync run's 2 drain steps as measured ones and a crashed
// run's import read "complete"). `stats`, both exporters and the analysis read them here, so an
// export of an import carries them on.

#include <cstdint>
#include <string>

#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// What recorded_run gives.
struct RecordedRun {
  /// The training pipeline's JSON name: metadata pipeline, else (sessions before the key) the
  /// workload_json's "pipeline"; "" when neither says (an imported foreign trace: base).
  std::string pipeline;
  /// The measured steps the run planned: workload_json "steps", else metadata
  /// exported_run_planned_steps (an import of an Embedscope export); 0 when unknown or malformed.
  int64_t planned_steps = 0;
  /// How the run ended: metadata exported_run_ended where the session is an import that recorded
  /// it (`exported`), else SessionReader::status() ("complete", "crashed", ...).
  std::string ended;
  /// Its end message: metadata exported_run_end_message, resp. end_message; "" none.
  std::string end_message;
  /// The session is an import of an Embedscope export that said how its run ended: `ended` and
  /// `end_message` are the exported run's; the session's own status() (the import's) is
  /// "complete" whatever they say.
  bool exported = false;
};

/// The run `session` recorded (RecordedRun). Reads metadata only; never throws for malformed
/// values (a workload_json that does not parse, a non-numeric planned step count: unknown).
/// Examples: a complete semi_sync run of 4 steps -> {"semi_sync", 4, "complete", "", false}; its
/// chrome export's import -> {"semi_sync", 4, "complete", "", true}; a foreign Kineto trace's
/// import -> {"", 0, "complete", "", false}.
RecordedRun recorded_run(const SessionReader& session);

}  // namespace embedscope::sessions
