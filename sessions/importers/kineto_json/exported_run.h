#pragma once
// An Embedscope export's exported run (tester53 F3): `embedscope export --format chrome` and
// `--format kineto` write the run's pipeline, planned measured steps and end in flat keys of their
// top-level "embedscope" object (sessions/exporters/exported_run_keys.h), which the import records
// in the session's metadata (pipeline, exported_run_planned_steps, exported_run_ended,
// exported_run_end_message) so that `stats` of the import leaves out the drain steps the run's
// own `stats` leaves out and says how the run ended. A trace without such an object (any other
// tool's) imports as before; one whose keys are malformed (a hand-edited export) is said (import
// problem bad_exported_run_key, naming the key) and imported as such a foreign trace.

#include <string>
#include <string_view>
#include <vector>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/store/session.h"
#include "importers/kineto_json/trace_model.h"

namespace embedscope::sessions::importers::kineto {

/// Reads the value of a file's top-level "embedscope" key (its JSON text `raw`, found at `where`,
/// which `at` names in words: "line 3, column 17") into `tr.exported_run_state` /
/// `tr.exported_run`. Not an object, or an object whose "exporter" is not a string starting
/// "embedscope export": not an Embedscope export, nothing set or said (a foreign trace's own key).
/// An export without "pipeline", "planned_steps", "ended" and "end_message" (written before
/// them): state none. Otherwise each key is checked: "pipeline" one of base / sparse_dist /
/// semi_sync (required), "planned_steps" an integer in [1, 2^53] (optional), "ended" one of
/// running / complete / cancelled / crashed / oom / hang / bad_input / write_failed (required),
/// "end_message" a string (optional); each malformed or missing one is an error problem
/// bad_exported_run_key naming "embedscope.KEY", its value and where, and the state is bad.
/// Never throws for bad input.
void read_exported_run(std::string_view raw, const Where& where, const std::string& at, RankTrace& tr,
                       ImportProblems& problems);

/// Records the exported run of the ranks `kept` in `w`'s metadata (pipeline,
/// exported_run_planned_steps when known, exported_run_ended, exported_run_end_message when not
/// empty) where every rank's file carries the same valid keys. Ranks whose files disagree (or
/// some files carry keys, others none) are an error problem exported_run_mismatch naming two
/// files, and nothing is recorded; a malformed key (state bad: already said) records nothing
/// either. Returns whether it recorded them.
bool record_exported_run(const std::vector<RankTrace>& kept, ImportProblems& problems, SessionWriter& w);

}  // namespace embedscope::sessions::importers::kineto
