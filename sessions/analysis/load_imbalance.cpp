#include "embedscope/sessions/analysis/load_imbalance.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"  // max_over_mean
#include "embedscope/sessions/analysis/plan_at_step.h"
#include "embedscope/sessions/model/hot_row_replica.h"
#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::sessions {

const char* to_string(LoadMetric m) {
  switch (m) {
    case LoadMetric::ids_looked_up: return "ids looked up";
    case LoadMetric::unique_ids: return "rows updated (distinct per step)";  // summed where steps are (tester51 F8)
    case LoadMetric::bytes_in: return "bytes in";
    case LoadMetric::bytes_out: return "bytes out";
    case LoadMetric::lookup_time: return "lookup time (ns)";
    case LoadMetric::cache_hits: return "cache hits";
    case LoadMetric::cache_misses: return "cache misses";
    case LoadMetric::rows_fetched: return "rows fetched (host)";
    case LoadMetric::bytes_h2d: return "bytes host to device";
    case LoadMetric::bytes_d2h: return "bytes device to host";
  }
  return "?";
}

LoadData load_data(const SessionReader& session, LoadMetric metric) {
  LoadData d;
  std::vector<std::string> table_names;
  for (const auto& t : workload_tables(session)) table_names.push_back(t.name);
  const auto counters = session.load();
  // A live rebalance that changed a table's type (table_wise split row_wise, ...) reuses its shard
  // indices for other rows: a counter of a shard that is not the final plan's shard of that index
  // (type, rows, columns; a move keeps them) gets a column of its own, "t #0 (table_wise to step
  // 1)", as the Sharding plan gives it a row (tester49 F3); "" = the final plan's shard.
  using Key = std::tuple<int32_t, int32_t, std::string>;
  std::vector<ShardRecord> initial;
  const std::vector<PlanChangeRecord> changes = session.plan_changes();
  if (!changes.empty()) try {
      initial = session.shards();
    } catch (const std::exception&) {  // no readable plan: one column per index, as before
    }
  const std::vector<ShardRecord> final_plan =
      initial.empty() ? std::vector<ShardRecord>{} : shards_at(initial, changes, std::numeric_limits<int64_t>::max());
  std::map<int64_t, std::vector<ShardRecord>> plans;  // by step, the plan serving it
  auto find = [](const std::vector<ShardRecord>& plan, int32_t table, int32_t shard) -> const ShardRecord* {
    for (const auto& sh : plan)
      if (sh.table == table && sh.shard_index == shard) return &sh;
    return nullptr;
  };
  auto key_of = [&](const LoadCounter& c) -> Key {
    if (initial.empty() || c.shard == kHotRowReplicaShard) return {c.table, c.shard, ""};
    auto it = plans.find(c.step);
    if (it == plans.end()) it = plans.emplace(c.step, shards_at(initial, changes, c.step)).first;
    const ShardRecord* then = find(it->second, c.table, c.shard);
    const ShardRecord* now = find(final_plan, c.table, c.shard);
    if (!then || (now && then->sharding_type == now->sharding_type && then->row_offset == now->row_offset &&
                  then->num_rows == now->num_rows && then->col_offset == now->col_offset && then->num_cols == now->num_cols))
      return {c.table, c.shard, ""};
    return {c.table, c.shard, then->sharding_type};
  };
  // the pipeline's drain steps, left out as `stats` leaves them out (its rule, from the step rows)
  const RunStats timing = analyze_step_times(session);
  int64_t last_measured = -1;
  for (const auto& s : session.steps()) last_measured = std::max(last_measured, s.step);
  if (timing.drain_steps > 0 && last_measured >= 0) {
    d.drain_steps = timing.drain_steps;
    d.drain_first = last_measured - timing.drain_steps + 1;
  }
  auto counted = [&](const LoadCounter& c) { return c.step >= 0 && (d.drain_steps == 0 || c.step < d.drain_first); };
  std::set<Key> shard_keys;
  std::map<Key, int64_t> last_step_of;  // a former shard's last measured step
  std::set<int64_t> steps;
  int32_t max_rank = -1;
  for (const auto& c : counters) {
    if (!counted(c)) continue;
    const Key k = key_of(c);
    shard_keys.insert(k);
    last_step_of[k] = std::max(last_step_of.count(k) ? last_step_of[k] : c.step, c.step);
    steps.insert(c.step);
    max_rank = std::max(max_rank, c.rank);
  }
  d.ranks = std::max<int32_t>(max_rank + 1, static_cast<int32_t>(std::strtol(session.meta(sessions::meta::kWorldSize, "0").c_str(), nullptr, 10)));
  std::map<Key, size_t> shard_col;
  for (const auto& k : shard_keys) {
    const auto [tk, sk, former] = k;
    shard_col[k] = d.shards.size();
    const std::string table = static_cast<size_t>(tk) < table_names.size() && !table_names[static_cast<size_t>(tk)].empty()
                                  ? table_names[static_cast<size_t>(tk)]
                                  : "table " + std::to_string(tk);
    // a rank's hot-row replica of the table (sessions::kHotRowReplicaShard): its own batch's hot ids
    std::string label = sk == kHotRowReplicaShard ? table + " hot rows" : table + " #" + std::to_string(sk);
    if (!former.empty()) label += " (" + former + " to step " + std::to_string(last_step_of[k]) + ")";
    d.shards.push_back(label);
    d.shard_tables.push_back(table);
  }
  std::map<int64_t, size_t> step_col;
  for (int64_t s : steps) {
    step_col[s] = d.steps.size();
    d.steps.push_back(s);
  }
  const auto R = static_cast<size_t>(d.ranks);
  d.by_shard.assign(R * d.shards.size(), 0.0);
  d.held.assign(R * d.shards.size(), 0);
  d.by_step.assign(R * d.steps.size(), 0.0);
  d.per_rank.assign(R, 0.0);
  for (const auto& c : counters) {
    if (!counted(c) || c.rank < 0) continue;
    double v = 0;
    switch (metric) {
      case LoadMetric::ids_looked_up: v = static_cast<double>(c.ids); break;
      case LoadMetric::unique_ids: v = static_cast<double>(c.unique_ids); break;
      case LoadMetric::bytes_in: v = static_cast<double>(c.bytes_in); break;
      case LoadMetric::bytes_out: v = static_cast<double>(c.bytes_out); break;
      case LoadMetric::lookup_time: v = static_cast<double>(c.lookup_ns); break;
      case LoadMetric::cache_hits: v = static_cast<double>(c.cache_hits); break;
      case LoadMetric::cache_misses: v = static_cast<double>(c.cache_misses); break;
      case LoadMetric::rows_fetched: v = static_cast<double>(c.rows_fetched); break;
      case LoadMetric::bytes_h2d: v = static_cast<double>(c.bytes_h2d); break;
      case LoadMetric::bytes_d2h: v = static_cast<double>(c.bytes_d2h); break;
    }
    const auto r = static_cast<size_t>(c.rank);
    const size_t col = shard_col[key_of(c)];
    d.by_shard[r * d.shards.size() + col] += v;
    d.held[r * d.shards.size() + col] = 1;
    d.by_step[r * d.steps.size() + step_col[c.step]] += v;
    d.per_rank[r] += v;
  }
  const bool time = metric == LoadMetric::lookup_time;
  if (time) d.recorded = recorded_max_over_mean(d.per_rank).has_value();
  for (size_t s = 0; s < d.steps.size(); ++s) {
    std::vector<double> col;
    for (size_t r = 0; r < R; ++r) col.push_back(d.by_step[r * d.steps.size() + s]);
    // no rank has any of the metric in the step: no ratio (0 of 0), not a balanced 1
    d.imbalance.push_back(recorded_max_over_mean(col).value_or(std::numeric_limits<double>::quiet_NaN()));
  }
  return d;
}

std::optional<double> recorded_max_over_mean(const std::vector<double>& ns) {
  if (std::none_of(ns.begin(), ns.end(), [](double v) { return v > 0; })) return std::nullopt;
  return max_over_mean(ns);
}

std::vector<WorkloadTable> workload_tables(const SessionReader& session) {
  std::vector<WorkloadTable> out;
  try {
    const auto w = nlohmann::json::parse(session.meta(sessions::meta::kWorkloadJson, "{}"));
    if (w.value("model", "") == "lm_embedding") {
      // an LLM token embedding (engine workload/lm_spec.h): one table of V' rows, V padded to a
      // multiple of m p when make_vocab_size_divisible_by m > 1 (LmWorkloadSpec::padded_vocab_size)
      const int64_t v = w.value("vocab_size", int64_t{0});
      const int64_t m = w.value("sharding", nlohmann::json::object()).value("make_vocab_size_divisible_by", int64_t{1});
      const int64_t mp = m * w.value("devices", nlohmann::json::object()).value("count", int64_t{1});
      out.push_back({"token_embedding", m <= 1 || mp <= 0 ? v : (v + mp - 1) / mp * mp});
      return out;
    }
    for (const auto& t : w.value("tables", nlohmann::json::array())) {
      // a table that uses another's rows (engine TableSpec::shared_tables) is no table of the plan
      if (t.contains("shared_with")) continue;
      // a hashed table (engine TableSpec::hash_size) stores hash_size rows: the rows its load and
      // id histogram are counted over
      out.push_back({t.value("name", ""), t.value("hash_size", int64_t{0}) > 0 ? t.value("hash_size", int64_t{0})
                                                                               : t.value("num_embeddings", int64_t{0})});
    }
  } catch (const std::exception&) {
    out.clear();
  }
  return out;
}

}  // namespace embedscope::sessions
