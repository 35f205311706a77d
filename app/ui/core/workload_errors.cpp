#include "core/workload_errors.h"

#include <algorithm>
#include <exception>
#include <set>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::ui {

namespace {
// Whether taking `pointer` out keeps every table and feature row (a key of an entry may go, the
// entry may not).
bool keeps_entries(const std::string& pointer) {
  const auto depth = std::count(pointer.begin(), pointer.end(), '/');
  if (pointer.rfind("/tables", 0) == 0 || pointer.rfind("/features", 0) == 0) return depth >= 3;
  return depth >= 1;
}

// The value of the same key in another entry of the array `pointer`'s object is in (table 2's
// embedding_dim: another table's, so that the stand-in raises no problem of its own, as 1 did
// with a dot interaction that needs every dim equal), else 1.
nlohmann::json sibling_number(const nlohmann::json& doc, const std::string& pointer) {
  using nlohmann::json;
  const json::json_pointer p(pointer);
  const json::json_pointer entry = p.parent_pointer();
  if (entry.empty()) return 1;
  const json& array = doc.at(entry.parent_pointer());
  if (!array.is_array()) return 1;
  for (const json& e : array)
    if (e.is_object() && &e != &doc.at(entry) && e.contains(p.back()) && e[p.back()].is_number() && e[p.back()] > 0)
      return e[p.back()];
  return 1;
}
}  // namespace

std::vector<WorkloadError> every_workload_error(nlohmann::json doc, const std::string& origin, size_t max_errors) {
  using nlohmann::json;
  std::vector<WorkloadError> out;
  std::set<std::string> seen;
  std::string erased;  // the pointer taken out last, and what it held
  json erased_value;
  for (size_t round = 0; round < 2 * max_errors + 2; ++round) {
    std::string msg;
    try {
      engine::parse_workload(doc, origin);
      return out;
    } catch (const std::exception& e) {
      msg = e.what();
    }
    if (const std::string prefix = origin + ": "; msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    const std::string pointer = !msg.empty() && msg[0] == '/' ? msg.substr(0, msg.find(": ")) : std::string();
    if (!erased.empty() && pointer == erased) {  // a key the workload needs: a number in its place
      if (!erased_value.is_number()) return out;
      doc[json::json_pointer(pointer)] = sibling_number(doc, pointer);
      erased.clear();
      continue;
    }
    erased.clear();
    if (pointer.empty() || seen.count(pointer) > 0 || out.size() >= max_errors) return out;
    out.push_back({pointer, msg});
    seen.insert(pointer);
    if (!keeps_entries(pointer)) return out;
    try {
      const json::json_pointer p(pointer);
      if (!doc.contains(p)) return out;
      json& parent = doc[p.parent_pointer()];
      if (!parent.is_object()) return out;
      erased_value = parent[p.back()];
      parent.erase(p.back());
      erased = pointer;
    } catch (const json::exception&) {  // not a pointer nlohmann reads
      return out;
    }
  }
  return out;
}

}  // namespace embedscope::ui
