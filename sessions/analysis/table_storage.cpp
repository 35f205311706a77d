#include "embedscope/sessions/analysis/table_storage.h"

#include <nlohmann/json.hpp>

namespace embedscope::sessions {

namespace {
int64_t sum_of(const nlohmann::json& a) {
  int64_t s = 0;
  if (a.is_array())
    for (const auto& v : a) s += v.is_number_integer() ? v.get<int64_t>() : 0;
  return s;
}
std::optional<double> number_of(const nlohmann::json& t, const char* key) {
  const auto it = t.find(key);
  if (it == t.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}
}  // namespace

std::vector<TableStorageRow> table_storage_rows(const std::string& table_storage_json, int64_t steps) {
  const nlohmann::json tables = nlohmann::json::parse(table_storage_json, nullptr, false);
  std::vector<TableStorageRow> rows;
  if (!tables.is_array()) return rows;
  const double per = steps > 0 ? static_cast<double>(steps) : 1.0;
  for (const auto& t : tables) {
    if (!t.is_object()) continue;
    TableStorageRow r;
    r.table = t.value("table", "");
    r.data_type = t.value("data_type", "fp32");
    r.rounding = r.data_type == "fp32" ? "-" : t.value("stochastic_rounding", false) ? "stochastic" : "nearest";
    r.state = t.value("optimizer_state_type", "fp32");
    r.placement = t.value("placement", "device");
    r.hash_size = t.value("hash_size", int64_t{0});
    r.low_rank_dim = t.value("low_rank_dim", int64_t{0});
    r.weight_bytes = sum_of(t.value("weight_bytes", nlohmann::json::array()));
    r.optimizer_state_bytes = sum_of(t.value("optimizer_state_bytes", nlohmann::json::array()));
    r.master_copy_bytes = t.value("master_copy_bytes", int64_t{0});
    r.max_abs_error = number_of(t, "max_abs_error");
    r.relative_error = number_of(t, "relative_error");
    if (const auto c = number_of(t, "hash_collisions")) r.collisions_per_step = *c / per;
    const int64_t hits = t.value("cache_hits", int64_t{0}), misses = t.value("cache_misses", int64_t{0});
    if (r.placement == "host_cached" && hits + misses > 0)
      r.cache_hit_rate = static_cast<double>(hits) / static_cast<double>(hits + misses);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::optional<std::vector<int64_t>> rank_hash_collisions(const std::string& table_storage_json) {
  const nlohmann::json tables = nlohmann::json::parse(table_storage_json, nullptr, false);
  if (!tables.is_array()) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& t : tables) {
    if (!t.is_object() || t.value("hash_size", int64_t{0}) <= 0) continue;
    const auto it = t.find("hash_collisions_per_rank");
    if (it == t.end() || !it->is_array()) return std::nullopt;
    if (out.size() < it->size()) out.resize(it->size(), 0);
    for (size_t r = 0; r < it->size(); ++r) out[r] += (*it)[r].is_number_integer() ? (*it)[r].get<int64_t>() : 0;
  }
  return out;
}

bool stored_differently(const TableStorageRow& row) {
  return row.data_type != "fp32" || row.hash_size > 0 || row.low_rank_dim > 0 || row.state != "fp32" ||
         row.placement != "device";
}

}  // namespace embedscope::sessions
