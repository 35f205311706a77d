#include "embedscope/sessions/analysis/plan_diff.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace embedscope::sessions {

namespace {

struct TablePlacement {
  std::string type;
  std::vector<int> ranks;                 // sorted, distinct
  std::vector<nlohmann::json> shards;     // as recorded, in order (the row and column ranges)
};

// The plan's tables by name, in the plan's order.
std::vector<std::pair<std::string, TablePlacement>> placements(const std::string& text) {
  std::vector<std::pair<std::string, TablePlacement>> out;
  const auto plan = nlohmann::json::parse(text, nullptr, false);
  if (!plan.is_object() || !plan.contains("tables") || !plan["tables"].is_array()) return out;
  for (const auto& t : plan["tables"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
    TablePlacement p;
    p.type = t.contains("sharding_type") && t["sharding_type"].is_string() ? t["sharding_type"].get<std::string>() : "?";
    if (t.contains("shards") && t["shards"].is_array())
      for (const auto& s : t["shards"]) {
        p.shards.push_back(s);
        if (s.is_object() && s.contains("rank") && s["rank"].is_number_integer()) p.ranks.push_back(s["rank"].get<int>());
      }
    std::sort(p.ranks.begin(), p.ranks.end());
    p.ranks.erase(std::unique(p.ranks.begin(), p.ranks.end()), p.ranks.end());
    out.emplace_back(t["name"].get<std::string>(), std::move(p));
  }
  return out;
}

}  // namespace

std::string ranks_text(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) return "no rank";
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    const std::string piece = j - i >= 2 ? fmt::format("{}-{}", ranks[i], ranks[j])
                              : j == i   ? fmt::format("{}", ranks[i])
                                         : fmt::format("{}, {}", ranks[i], ranks[j]);
    out += (out.empty() ? "" : ", ") + piece;
    i = j + 1;
  }
  return "ranks " + out;
}

std::vector<std::string> plan_changes(const std::string& base_json, const std::string& other_json) {
  const auto base = placements(base_json), other = placements(other_json);
  std::map<std::string, const TablePlacement*> in_base, in_other;
  for (const auto& [name, p] : base) in_base[name] = &p;
  for (const auto& [name, p] : other) in_other[name] = &p;
  std::vector<std::string> out;
  for (const auto& [name, o] : other) {
    const auto it = in_base.find(name);
    if (it == in_base.end()) {
      out.push_back(name + ": not in the baseline's plan");
      continue;
    }
    const TablePlacement& b = *it->second;
    if (b.type != o.type)
      out.push_back(fmt::format("{}: {} on {} -> {} on {}", name, b.type, ranks_text(b.ranks), o.type, ranks_text(o.ranks)));
    else if (b.ranks != o.ranks)
      out.push_back(fmt::format("{}: {} -> {} ({})", name, ranks_text(b.ranks), ranks_text(o.ranks), o.type));
    else if (b.shards != o.shards)
      out.push_back(fmt::format("{}: shards split differently ({} on {})", name, o.type, ranks_text(o.ranks)));
  }
  for (const auto& [name, b] : base)
    if (!in_other.count(name)) out.push_back(name + ": only in the baseline's plan");
  return out;
}

}  // namespace embedscope::sessions
