#pragma once
// Teaching scenarios (resources/scenarios/*.json): a title, a short explanation and two or more
// runs of a workload to compare. The workbench's scenario view shows them and `embedscope
// scenario` runs them headless (exec/scenario_run.h runs one run and computes its figures).
// A scenario is a list of workloads (presets with overrides, or inline), so it lives beside the
// presets and the workload parsers, below both programs.
//
// File format (docs/workbench.md, "Teaching scenarios"):
//   {"id": "row_wise_vs_table_wise",                 // [a-z0-9_]+, names the session files
//    "title": "Row-wise versus table-wise",
//    "explanation": ["paragraph", "paragraph", ...],  // or one string
//    "align_step": 0,                                  // optional: the step aligned across runs
//                                                      // and played (warmup steps are -1, -2, ...)
//    "runs": [{"label": "table_wise", "preset": "criteo_kaggle", "overrides": {...}},
//             {"label": "inline", "workload": {...a whole workload...}}]}
// A run is either a built-in preset with optional overrides, applied as a JSON merge patch
// (RFC 7386: objects merge key by key, arrays and values replace, null deletes), or an inline
// workload. Either way the result is validated by the engine's own parser: parse_workload for a
// DLRM workload, parse_lm_workload for an lm_embedding one ("model": "lm_embedding", or a preset
// of resources/workloads/lm/, whose JSON is its to_json), so any workload field the engine knows
// is accepted and nothing else is. A scenario may mix both kinds.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

struct ScenarioRun {
  std::string label;
  nlohmann::json workload;     ///< the complete workload JSON (preset + overrides applied)
  WorkloadSpec spec;   ///< the same, validated (a DLRM workload; default for an lm_embedding one)
  std::optional<LmWorkloadSpec> lm;  ///< an lm_embedding workload, validated (then `spec` is unused)
  /// Steps, warmup steps and ranks of the run, whichever kind it is.
  int64_t steps() const { return lm ? lm->steps : spec.steps; }
  int64_t warmup_steps() const { return lm ? 0 : spec.warmup_steps; }
  int world_size() const { return lm ? lm->world_size : spec.devices.count; }
};

struct Scenario {
  std::string id;
  std::string title;
  std::vector<std::string> paragraphs;
  int64_t align_step = 0;      ///< the step that starts at x = 0 in every run's timeline
  std::vector<ScenarioRun> runs;
  std::string origin;          ///< the file (or "scenario ID" for a built-in one)
};

/// Parses and validates a scenario. Throws SpecError "<origin>: <JSON pointer>: <reason>"
/// for a missing or mistyped key, an unknown key, fewer than two runs, a duplicate label, or a
/// run whose workload the engine rejects; for the latter the pointer runs from the scenario's
/// root into the run (e.g. "x.json: /runs/1/overrides/devices/count: must be in [1, 64], got 0";
/// a problem in the preset's own part reads "x.json: /runs/1 (preset NAME): /pointer: ..."), or an
/// align_step that is not a step of every run ("x.json: /align_step: 99 is not a step of run 0
/// (\"a\"): its measured steps are 0..1, its warmup steps -2..-1").
/// A workload (an object without "runs" that has "tables", "batch_size" or "model":
/// "lm_embedding") is refused as such: "x.json: /: a workload file, not a scenario (no "runs"):
/// run it with `embedscope run x.json`; ...".
Scenario parse_scenario(const nlohmann::json& j, const std::string& origin);
/// Reads a scenario file; SpecError names the file (and the line of a JSON syntax error).
Scenario load_scenario_file(const std::string& path);
/// The scenarios built into the program (resources/scenarios/*.json), sorted by id. Throws
/// SpecError if one is broken (the unit tests load every one).
std::vector<Scenario> builtin_scenarios();
/// The session file name of run `index`: "<id>-<index>.db" (what "Open folder" looks for).
std::string session_file_name(const Scenario& s, size_t index);
/// The built-in scenario `id`, or else the scenario file `name_or_file` (a name with a '/' or
/// ending in ".json" is always a file). Throws SpecError naming the file (load_scenario_file's
/// errors) or, for a name that is neither, "scenario NAME: not a built-in scenario (built in:
/// a, b, ...) and no such file".
Scenario find_scenario(const std::string& name_or_file);
/// `s` with every run's "steps" set to `steps` (a JSON merge patch of each run's workload,
/// validated again by the engine's parser). Throws SpecError "--steps: must be at least 1, got
/// N", or the parser's refusal of a run as "--steps N: <origin>: /runs/I/steps: <reason>" (e.g. a
/// DLRM workload whose rebalance policy needs more steps).
Scenario with_steps(Scenario s, int64_t steps);

}  // namespace embedscope::engine
