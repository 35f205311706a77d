// Built-in workload presets: resources/workloads/*.json, embedded at build time by
// resources/cmake/embed_files.cmake (key = file stem).

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "checker.h"
#include "embedscope/engine/workload/presets.h"

#include <algorithm>

#include "embedscope/engine/workload/lm_spec.h"

namespace embedscope::resources {
const std::map<std::string, std::string>& workload_presets();
}  // namespace embedscope::resources

namespace embedscope::engine {
std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : resources::workload_presets()) names.push_back(name);
  return names;  // sorted: the map's order
}

const std::string& preset_json(const std::string& name) {
  const auto& presets = resources::workload_presets();
  auto it = presets.find(name);
  if (it == presets.end()) {
    // every preset `run --preset` takes: the DLRM ones and the lm_embedding ones (tester35 D10)
    std::vector<std::string> all = preset_names();
    for (const std::string& n : lm_preset_names()) all.push_back(n);
    std::sort(all.begin(), all.end());
    throw SpecError(fmt::format("unknown preset \"{}\"; known presets: {}", name, fmt::join(all, ", ")));
  }
  return it->second;
}

WorkloadSpec load_preset(const std::string& name) {
  const std::string origin = "preset " + name;
  return parse_workload(detail::parse_json_text(preset_json(name), origin), origin);
}

}  // namespace embedscope::engine
