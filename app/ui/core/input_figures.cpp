#include "core/input_figures.h"

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <exception>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/analysis/analysis.h"  // analyze_step_times: the drain steps
#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::ui {

int64_t expected_ids_per_batch(const engine::WorkloadSpec& spec) {
  double per_sample = 0;
  for (const auto& f : spec.features)
    per_sample += spec.input.kind == engine::InputKind::criteo_tsv ? 1.0 : std::max(0.0, f.pooling_factor.mean);
  const double ids = std::ceil(static_cast<double>(std::max<int64_t>(1, spec.batch_size)) * per_sample);
  return ids < 1 ? 1 : ids > 9e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(ids);
}

int64_t input_figure_batches(const engine::WorkloadSpec& spec) {
  return std::max<int64_t>(1, kInputFigureIds / expected_ids_per_batch(spec));
}

InputFigures input_figures(const sessions::SessionReader& session) {
  InputFigures out;
  const std::string text = session.meta(sessions::meta::kWorkloadJson, "");
  if (text.empty()) {
    out.unavailable = "this session has no workload (an imported trace?): input figures come from the workload of a run";
    return out;
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    out.unavailable = "the session's workload_json is not a JSON object";
    return out;
  }
  if (j.contains("model") && j["model"].is_string() && j["model"].get<std::string>() != "dense") {
    // no article: "a lm_embedding run" (tester43 F5) read wrong
    out.unavailable = fmt::format("input figures are counted for pooled embedding bags (DLRM), not for this {} run",
                                  j["model"].get<std::string>());
    return out;
  }
  engine::WorkloadSpec spec;
  try {
    spec = engine::parse_workload(j, sessions::meta::kWorkloadJson);
  } catch (const std::exception& e) {
    out.unavailable = fmt::format("the session's workload no longer parses: {}", e.what());
    return out;
  }
  // A run that did not end complete (killed, crashed, cancelled, write_failed, still running)
  // trained only the measured steps its session holds: their batches are counted, not the
  // planned steps' (retest49 R6: a killed run's page counted 1775 batches of its 3000 planned
  // steps, 1083 of them never trained on). A complete run trained every planned step.
  const std::string ended = session.status();
  const int64_t planned_steps = spec.steps;
  int64_t held_steps = -1;  // the measured steps the session holds, where fewer than planned
  if (ended != "complete") {
    int64_t last = -1;
    for (const auto& st : session.steps()) last = std::max(last, st.step);
    for (const auto& c : session.load()) last = std::max(last, c.step);
    if (last + 1 < spec.steps) held_steps = last + 1;
  }
  const std::string end_text =
      ended == "running" ? std::string("the run is still running")
                         : fmt::format("the run ended {}", ended.empty() ? std::string("without an end record") : ended);
  if (held_steps == 0) {  // the 0-step case of tester49 F15 (the load view says it before asking)
    out.unavailable = fmt::format("no measured step ({} before its first measured step): no batch of the workload's "
                                  "input was trained on",
                                  end_text);
    return out;
  }
  if (held_steps > 0) spec.steps = held_steps;
  // the session's world size (metadata), not the workload's default device count: a schema-v1
  // session stored its workload without "devices" (tester60a F9: 1 batch of 4 samples a step for
  // a 2-rank session of 8)
  if (const int64_t world = std::atoll(session.meta(sessions::meta::kWorldSize, "0").c_str());
      world > 0 && world != spec.devices.count)
    spec.devices.count = static_cast<int>(world);
  // a pipeline's drain steps, which stats and the charts beside the table leave out (RunStats::
  // drain_steps, the same rule): the batches of the counted steps only (tester60a F12)
  const int64_t measured_steps = spec.steps;
  const int64_t drain = std::min(sessions::analyze_step_times(session).drain_steps, spec.steps);
  if (drain > 0 && drain < spec.steps) spec.steps -= drain;
  try {
    // at most about kInputFigureIds ids: the first batches of a large run; the measured steps'
    // batches only: the window of the heatmaps and row histogram beside it
    out.inspection = engine::inspect_input(spec, input_figure_batches(spec), true);
  } catch (const std::exception& e) {
    out.unavailable = fmt::format("the run's input can no longer be read: {}", e.what());
    return out;
  }
  const auto& in = out.inspection;
  const std::string what =
      spec.input.kind == engine::InputKind::synthetic
          ? fmt::format("synthetic input (seed {}), regenerated", spec.seed)
          : fmt::format("{} {}, re-read", engine::enum_name(spec.input.kind), fmt::join(spec.input.paths, ", "));
  // the steps the session holds, where fewer than planned (R6)
  const std::string held =
      held_steps > 0 ? fmt::format(" the session holds ({}; {} were planned)", end_text, planned_steps)
                     : std::string();
  // "the 18 counted steps 0-17 (the drain steps 18-19 left out, as stats)" or "the 20 measured steps"
  const std::string steps_text =
      spec.steps < measured_steps
          ? fmt::format("{} counted step{} 0-{} (the drain {} left out, as stats)", spec.steps, spec.steps == 1 ? "" : "s",
                        spec.steps - 1,
                        measured_steps - spec.steps == 1 ? fmt::format("step {}", spec.steps)
                                                         : fmt::format("steps {}-{}", spec.steps, measured_steps - 1))
          : fmt::format("{} measured steps", spec.steps);
  const std::string counted =
      (in.batches == in.run_batches ? fmt::format("the {} batches of the {}{}", in.batches, steps_text, held)
                                    : fmt::format("the first {} of the {} batches of the {}{}", in.batches,
                                                  in.run_batches, steps_text, held)) +
      (spec.warmup_steps == 1   ? std::string(" (the warm-up step is left out, as above)")
       : spec.warmup_steps > 1 ? fmt::format(" (the {} warm-up steps are left out, as above)", spec.warmup_steps)
                               : std::string());
  out.source = fmt::format("{}: {}, {} samples{}", what, counted, in.samples,
                           in.skipped_lines > 0 ? fmt::format(", {} malformed lines skipped", in.skipped_lines) : "");
  return out;
}

}  // namespace embedscope::ui
