// Teaching scenarios (workload/scenario.h): the file format, its errors, the built-in ones.
#include "embedscope/engine/workload/scenario.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/read_file.h"

namespace embedscope::resources {
const std::map<std::string, std::string>& scenario_files();  // generated (resources/CMakeLists.txt)
}
namespace embedscope::engine::detail {
// engine/workload/reader.cpp: JSON text to json, refusing duplicate keys; errors name the line.
nlohmann::json parse_json_text(const std::string& text, const std::string& origin);
}  // namespace embedscope::engine::detail

namespace embedscope::engine {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& origin, const std::string& pointer, const std::string& reason) {
  throw SpecError(fmt::format("{}: {}: {}", origin, pointer, reason));
}

std::string string_at(const json& obj, const char* key, const std::string& origin, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) fail(origin, where, fmt::format("missing \"{}\"", key));
  if (!it->is_string() || it->get<std::string>().empty())
    fail(origin, where + "/" + key, "must be a non-empty string");
  return it->get<std::string>();
}

void only_keys(const json& obj, std::initializer_list<const char*> keys, const std::string& origin,
               const std::string& where) {
  for (const auto& item : obj.items()) {
    const std::string& k = item.key();  // not a structured binding: clang 14 cannot capture one
    if (std::none_of(keys.begin(), keys.end(), [&](const char* a) { return k == a; }))
      fail(origin, where + "/" + k, "unknown key");
  }
}

// Validates `workload` with the engine's parser; a pointer in its error is rewritten to run from
// the scenario's root (`base`, e.g. "/runs/1/workload") when `patch` (what the file says at
// `base`) holds that pointer, else it is left relative to `fallback` (e.g. "(preset NAME)").
// The run of `workload` with the engine's parser of its kind (DLRM or lm_embedding).
void validate_run(ScenarioRun& run, const json& patch, const std::string& origin, const std::string& base,
                  const std::string& fallback) {
  const std::string tag = "\x1f";  // an origin that cannot occur in a message
  try {
    if (is_lm_workload(run.workload))
      run.lm = parse_lm_workload(run.workload, tag);
    else
      run.spec = parse_workload(run.workload, tag);
  } catch (const SpecError& e) {
    std::string msg = e.what();
    if (msg.rfind(tag + ": ", 0) != 0) throw SpecError(origin + ": " + base + ": " + msg);
    msg = msg.substr(tag.size() + 2);  // "<pointer>: <reason>" (or just a reason)
    const size_t colon = msg.find(": ");
    if (msg.rfind('/', 0) == 0 && colon != std::string::npos) {
      const std::string pointer = msg.substr(0, colon);
      bool in_patch = false;
      try {
        in_patch = patch.contains(json::json_pointer(pointer));
      } catch (const json::exception&) {
      }
      if (in_patch || fallback.empty()) throw SpecError(origin + ": " + base + pointer + msg.substr(colon));
      throw SpecError(origin + ": " + fallback + ": " + msg);
    }
    throw SpecError(origin + ": " + base + ": " + msg);
  }
}

}  // namespace

Scenario parse_scenario(const json& j, const std::string& origin) {
  if (!j.is_object()) fail(origin, "/", "a scenario must be a JSON object");
  // a workload file given where a scenario goes (tester42 F15: it read "/batch_size: unknown key")
  if (!j.contains("runs") && (is_lm_workload(j) || j.contains("tables") || j.contains("batch_size")))
    fail(origin, "/",
         "a workload file, not a scenario (no \"runs\"): run it with `embedscope run " + origin +
             "`; a scenario has \"id\", \"title\", \"explanation\" and \"runs\" (two or more workloads to compare)");
  only_keys(j, {"id", "title", "explanation", "align_step", "runs"}, origin, "");
  Scenario s;
  s.origin = origin;
  s.id = string_at(j, "id", origin, "/");
  if (!std::regex_match(s.id, std::regex("[a-z0-9_]+")))
    fail(origin, "/id", "must be lower-case letters, digits and '_' (it names session files), got \"" + s.id + "\"");
  s.title = string_at(j, "title", origin, "/");
  const auto ex = j.find("explanation");
  if (ex == j.end()) fail(origin, "/", "missing \"explanation\"");
  if (ex->is_string()) {
    s.paragraphs.push_back(ex->get<std::string>());
  } else if (ex->is_array() && !ex->empty()) {
    for (size_t i = 0; i < ex->size(); ++i) {
      if (!(*ex)[i].is_string()) fail(origin, fmt::format("/explanation/{}", i), "must be a string");
      s.paragraphs.push_back((*ex)[i].get<std::string>());
    }
  } else {
    fail(origin, "/explanation", "must be a string or a non-empty array of strings (paragraphs)");
  }
  if (const auto a = j.find("align_step"); a != j.end()) {
    if (!a->is_number_integer()) fail(origin, "/align_step", "must be an integer (warmup steps are negative)");
    s.align_step = a->get<int64_t>();
  }
  const auto runs = j.find("runs");
  if (runs == j.end()) fail(origin, "/", "missing \"runs\"");
  if (!runs->is_array() || runs->size() < 2) fail(origin, "/runs", "must be an array of at least two runs");
  std::set<std::string> labels;
  for (size_t i = 0; i < runs->size(); ++i) {
    const std::string at = fmt::format("/runs/{}", i);
    const json& r = (*runs)[i];
    if (!r.is_object()) fail(origin, at, "a run must be an object");
    only_keys(r, {"label", "preset", "overrides", "workload"}, origin, at);
    ScenarioRun run;
    run.label = string_at(r, "label", origin, at);
    if (!labels.insert(run.label).second) fail(origin, at + "/label", "\"" + run.label + "\" is used by another run");
    const bool preset = r.contains("preset"), inline_workload = r.contains("workload");
    if (preset == inline_workload) fail(origin, at, "needs either \"preset\" (with optional \"overrides\") or \"workload\"");
    if (inline_workload) {
      if (r.contains("overrides")) fail(origin, at + "/overrides", "only goes with \"preset\"");
      run.workload = r["workload"];
      validate_run(run, run.workload, origin, at + "/workload", "");
    } else {
      const std::string name = string_at(r, "preset", origin, at);
      try {
        run.workload = is_lm_preset(name) ? to_json(load_lm_preset(name))
                                          : detail::parse_json_text(preset_json(name), "preset " + name);
      } catch (const SpecError& e) {
        fail(origin, at + "/preset", e.what());
      }
      json patch = json::object();
      if (const auto o = r.find("overrides"); o != r.end()) {
        if (!o->is_object()) fail(origin, at + "/overrides", "must be an object (a JSON merge patch of the preset)");
        patch = *o;
      }
      run.workload.merge_patch(patch);
      validate_run(run, patch, origin, at + "/overrides", at + " (preset " + name + ")");
    }
    s.runs.push_back(std::move(run));
  }
  // the aligned step must be one every run has (tester47 F14.5: 99 for 2-step runs was accepted
  // and the workbench aligned on step 1 without a word)
  for (size_t i = 0; i < s.runs.size(); ++i) {
    const ScenarioRun& run = s.runs[i];
    if (s.align_step < run.steps() && s.align_step >= -run.warmup_steps()) continue;
    fail(origin, "/align_step",
         fmt::format("{} is not a step of run {} (\"{}\"): its measured steps are 0..{}{}", s.align_step, i, run.label,
                     run.steps() - 1,
                     run.warmup_steps() > 0 ? fmt::format(", its warmup steps -{}..-1", run.warmup_steps())
                                            : std::string(" (it has no warmup steps)")));
  }
  return s;
}

Scenario load_scenario_file(const std::string& path) {
  // the reason with the failure ("cannot open the scenario file: Permission denied"), a directory
  // said as such (was a JSON syntax error at line 1, column 1)
  return parse_scenario(detail::parse_json_text(read_whole_file(path, "", "scenario file"), path), path);
}

std::vector<Scenario> builtin_scenarios() {
  std::vector<Scenario> out;
  for (const auto& [stem, text] : resources::scenario_files()) {
    const std::string origin = "resources/scenarios/" + stem + ".json";
    out.push_back(parse_scenario(detail::parse_json_text(text, origin), origin));
  }
  std::sort(out.begin(), out.end(), [](const Scenario& a, const Scenario& b) { return a.id < b.id; });
  return out;
}

std::string session_file_name(const Scenario& s, size_t index) { return fmt::format("{}-{}.db", s.id, index); }

Scenario find_scenario(const std::string& name_or_file) {
  const bool file_like = name_or_file.find('/') != std::string::npos ||
                         (name_or_file.size() > 5 && name_or_file.compare(name_or_file.size() - 5, 5, ".json") == 0);
  if (!file_like) {
    std::vector<Scenario> all = builtin_scenarios();
    for (Scenario& s : all)
      if (s.id == name_or_file) return std::move(s);
    std::error_code ec;
    const auto st = std::filesystem::status(name_or_file, ec);
    if (!std::filesystem::is_regular_file(st)) {
      std::string ids;
      for (const Scenario& s : all) ids += (ids.empty() ? "" : ", ") + s.id;
      // what stands at that name: nothing, a directory, or a name the system cannot resolve
      // (a symbolic link loop, a path through a file: the errno text)
      const std::string file = std::filesystem::is_directory(st) ? "a directory of that name, not a scenario file"
                               : ec && ec != std::errc::no_such_file_or_directory
                                   ? fmt::format("no file: {}", ec.message())
                                   : std::string("no such file");
      throw SpecError(fmt::format("scenario {}: not a built-in scenario (built in: {}) and {}", name_or_file, ids, file));
    }
  }
  return load_scenario_file(name_or_file);
}

Scenario with_steps(Scenario s, int64_t steps) {
  if (steps < 1) throw SpecError(fmt::format("--steps: must be at least 1, got {}", steps));
  const json patch = {{"steps", steps}};
  for (size_t i = 0; i < s.runs.size(); ++i) {
    ScenarioRun& run = s.runs[i];
    run.workload.merge_patch(patch);
    run.lm.reset();
    validate_run(run, patch, fmt::format("--steps {}: {}", steps, s.origin), fmt::format("/runs/{}", i), "");
  }
  return s;
}

}  // namespace embedscope::engine
