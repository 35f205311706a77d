#pragma once
// The built-in workload presets: resources/workloads/*.json, embedded at build time by
// resources/cmake/embed_files.cmake (name = file stem), e.g. "tiny", "criteo_kaggle".

#include <string>
#include <vector>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// Names of the built-in presets (resources/workloads/*.json, embedded at build time).
std::vector<std::string> preset_names();
/// The preset's JSON text; throws SpecError listing the known names if absent.
const std::string& preset_json(const std::string& name);
/// The preset parsed and validated (origin "preset NAME" in errors); throws SpecError as
/// preset_json for an unknown name.
WorkloadSpec load_preset(const std::string& name);

}  // namespace embedscope::engine
