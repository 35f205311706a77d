// The built-in lm_embedding presets: resources/workloads/lm/*.json, embedded at build time
// (lm_spec.h: lm_preset_names, load_lm_preset). A folder of their own, so that the DLRM
// preset list (presets.h) and everything that iterates it see only DLRM workloads.

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/lm_spec.h"
#include "workload/checker.h"

namespace embedscope::resources {
const std::map<std::string, std::string>& lm_workload_presets();
}  // namespace embedscope::resources

namespace embedscope::engine {

std::vector<std::string> lm_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : resources::lm_workload_presets()) names.push_back(name);
  return names;
}

bool is_lm_preset(const std::string& name) { return resources::lm_workload_presets().count(name) > 0; }

LmWorkloadSpec load_lm_preset(const std::string& name) {
  const auto& presets = resources::lm_workload_presets();
  auto it = presets.find(name);
  if (it == presets.end())
    throw SpecError(fmt::format("unknown lm_embedding preset \"{}\"; known: {}", name, fmt::join(lm_preset_names(), ", ")));
  const std::string origin = "preset " + name;
  return parse_lm_workload(detail::parse_json_text(it->second, origin), origin);
}

bool is_lm_workload_file(const std::string& path) {
  return is_lm_workload(detail::read_json_file(path, "workload file"));
}

}  // namespace embedscope::engine
