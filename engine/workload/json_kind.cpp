#include "embedscope/engine/workload/json_kind.h"

#include <exception>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/importers/importer.h"  // read_head

namespace embedscope::engine {

using nlohmann::json;

JsonFileKind json_file_kind(const std::string& file) {
  std::string head;
  try {
    head = sessions::importers::read_head(file, 1 << 16);
  } catch (const std::exception&) {
    return JsonFileKind::none;
  }
  std::string flat;  // without blanks: `scaling --json` indents its object
  for (char c : head)
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') flat += c;
  if (flat.rfind("{\"batch_size_per_gpu\"", 0) == 0) return JsonFileKind::scaling_study;
  const json j = json::parse(head, nullptr, false);  // whole files only: a cut head is discarded
  if (!j.is_object()) return JsonFileKind::none;
  if (j.contains("gpu") && j["gpu"].is_object()) return JsonFileKind::hardware_profile;
  if (j.contains("tables") && j["tables"].is_array() && !j["tables"].empty() && j["tables"][0].is_object() &&
      j["tables"][0].contains("sharding_type"))
    return JsonFileKind::sharding_plan;
  if ((j.contains("model") && j["model"] == "lm_embedding") || (j.contains("tables") && j.contains("devices")))
    return JsonFileKind::workload;
  return JsonFileKind::none;
}

const char* json_file_kind_name(JsonFileKind kind) {
  switch (kind) {
    case JsonFileKind::scaling_study: return "a scaling study (embedscope scaling --json)";
    case JsonFileKind::hardware_profile: return "a hardware profile";
    case JsonFileKind::sharding_plan: return "a sharding plan (embedscope plan --json)";
    case JsonFileKind::workload: return "a workload";
    case JsonFileKind::none: break;
  }
  return "";
}

}  // namespace embedscope::engine
