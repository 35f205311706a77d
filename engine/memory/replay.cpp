#include "embedscope/engine/memory/replay.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/sharding.h"

namespace embedscope::engine {

MemoryTrace load_memory_trace(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw SpecError(fmt::format("{}: is a directory, not a trace", path));
  std::ifstream f(path);
  if (!f) throw SpecError(fmt::format("{}: cannot open", path));
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw SpecError(fmt::format("{}: not a JSON trace: {}", path, e.what()));
  }
  auto fail = [&](const std::string& ptr, const std::string& why) { throw SpecError(fmt::format("{}: {}: {}", path, ptr, why)); };
  if (!j.is_object()) fail("/", "must be an object with \"actions\"");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "actions" && it.key() != "capacity_bytes") fail("/" + it.key(), "unknown key");
  MemoryTrace t;
  if (j.contains("capacity_bytes")) {
    if (!j["capacity_bytes"].is_number_integer() || j["capacity_bytes"].get<int64_t>() <= 0)
      fail("/capacity_bytes", "must be an integer > 0");
    t.capacity_bytes = j["capacity_bytes"].get<int64_t>();
  }
  if (!j.contains("actions") || !j["actions"].is_array()) fail("/actions", "must be an array");
  const auto& actions = j["actions"];
  for (size_t i = 0; i < actions.size(); ++i) {
    const auto& a = actions[i];
    const std::string p = fmt::format("/actions/{}", i);
    if (!a.is_object()) fail(p, "must be an object");
    for (auto it = a.begin(); it != a.end(); ++it)
      if (it.key() != "action" && it.key() != "id" && it.key() != "size" && it.key() != "stream" && it.key() != "tag")
        fail(p + "/" + it.key(), "unknown key");
    MemoryAction m;
    const std::string kind = a.value("action", "");
    if (kind != "alloc" && kind != "free") fail(p + "/action", "must be \"alloc\" or \"free\"");
    m.alloc = kind == "alloc";
    if (!a.contains("id") || !a["id"].is_number_integer()) fail(p + "/id", "must be an integer");
    m.id = a["id"].get<int64_t>();
    if (m.alloc) {
      if (!a.contains("size") || !a["size"].is_number_integer() || a["size"].get<int64_t>() <= 0 ||
          a["size"].get<int64_t>() > kMaxMemoryBytes)
        fail(p + "/size", fmt::format("must be an integer in [1, {}]", kMaxMemoryBytes));
      m.size = a["size"].get<int64_t>();
    }
    if (a.contains("stream")) {
      if (!a["stream"].is_number_integer()) fail(p + "/stream", "must be an integer");
      m.stream = a["stream"].get<int64_t>();
    }
    if (a.contains("tag")) {
      if (!a["tag"].is_string()) fail(p + "/tag", "must be a string");
      m.tag = a["tag"].get<std::string>();
    }
    t.actions.push_back(std::move(m));
  }
  return t;
}

ReplayResult replay(const MemoryTrace& trace, const AllocatorConfig& config, const std::string& origin) {
  ReplayResult r;
  r.config = config;
  r.config.back_with_memory = false;
  r.label = to_string(config.kind);
  if (config.max_split_size > 0) r.label += ", max_split_size " + format_bytes(config.max_split_size);
  auto alloc = DeviceAllocator::create(r.config);
  std::unordered_map<int64_t, Allocation> live;
  int64_t sampled_peak = 0;
  for (size_t i = 0; i < trace.actions.size(); ++i) {
    const MemoryAction& a = trace.actions[i];
    if (a.alloc) {
      if (live.count(a.id)) throw SpecError(fmt::format("{}: /actions/{}/id: id {} is already allocated", origin, i, a.id));
      try {
        live[a.id] = alloc->allocate(a.size, a.tag.empty() ? "unknown" : a.tag);
      } catch (const DeviceOutOfMemory& e) {
        r.oom = true;
        r.oom_action = static_cast<int64_t>(i);
        r.oom_message = e.what();
        break;
      }
      const int64_t reserved = alloc->reserved_bytes();
      if (reserved > r.peak_reserved) {
        // a new peak; the full figures walk every block, so they are taken when the peak grew
        // by 1% or more since they were last taken (keeps long traces linear)
        if (reserved >= sampled_peak + sampled_peak / 100 || sampled_peak == 0) {
          const MemoryStats st = alloc->stats();
          r.fragmentation_at_peak = st.external_fragmentation;
          r.memviz_at_peak = st.memviz_fragmentation;
          r.segments_at_peak = st.segments;
          sampled_peak = reserved;
        }
        r.peak_reserved = reserved;
      }
      r.peak_allocated = std::max(r.peak_allocated, alloc->allocated_bytes());
    } else {
      auto it = live.find(a.id);
      if (it == live.end()) throw SpecError(fmt::format("{}: /actions/{}/id: free of id {}, which is not allocated", origin, i, a.id));
      alloc->free(it->second);
      live.erase(it);
    }
  }
  r.final_reserved = alloc->stats().reserved;
  return r;
}

}  // namespace embedscope::engine
