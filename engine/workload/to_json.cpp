// WorkloadSpec to JSON: every field, defaults included, so that the result round-trips
// through parse_workload (sessions store it as workload_json).

#include <algorithm>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

#include "checker.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

using nlohmann::json;

json to_json(const WorkloadSpec& s) {
  json j;
  j["name"] = s.name;
  j["description"] = s.description;
  j["source"] = s.source;

  json tables = json::array();
  std::vector<int> written_at;  // per entry of tables: TableSpec::written_index
  for (const TableSpec& t : s.tables) {
    // the table's own features: those of the tables folded into it (shared_with) come last
    size_t shared_features = 0;
    for (const auto& st : t.shared_tables) shared_features += st.feature_names.size();
    const std::vector<std::string> own(t.feature_names.begin(),
                                       t.feature_names.end() - static_cast<std::ptrdiff_t>(shared_features));
    tables.push_back({{"name", t.name},
                      {"num_embeddings", t.num_embeddings},
                      {"embedding_dim", t.embedding_dim},
                      {"pooling", to_string(t.pooling)},
                      {"feature_names", own}});
    // written only where it is not the default, so fp32 workloads serialize as before
    if (t.data_type != TableDataType::fp32) tables.back()["data_type"] = to_string(t.data_type);
    if (t.stochastic_rounding) tables.back()["stochastic_rounding"] = *t.stochastic_rounding;
    if (t.hash_size > 0) tables.back()["hash_size"] = t.hash_size;
    if (t.optimizer_state_type != OptimizerStateType::fp32)
      tables.back()["optimizer_state_type"] = enum_name(t.optimizer_state_type);
    if (t.placement != TablePlacement::device) tables.back()["placement"] = enum_name(t.placement);
    if (t.placement == TablePlacement::host_cached) {
      tables.back()["cache_load_factor"] = t.cache_load_factor;
      tables.back()["cache_policy"] = enum_name(t.cache_policy);
      if (t.prefetch_pipeline) tables.back()["prefetch_pipeline"] = true;
    }
    if (t.low_rank_dim > 0) tables.back()["low_rank_dim"] = t.low_rank_dim;
    written_at.push_back(t.written_index);
    // each shared table again as it was given, right after the table whose rows it uses
    const json owner = tables.back();
    for (const auto& st : t.shared_tables) {
      json a = owner;
      a["name"] = st.name;
      a["feature_names"] = st.feature_names;
      a["shared_with"] = t.name;
      tables.push_back(std::move(a));
      written_at.push_back(st.written_index);
    }
  }
  // in the order the workload wrote them, where it is known: reading the result back gives each
  // table the same written_index, so the generator's labels survive the round trip
  if (std::none_of(written_at.begin(), written_at.end(), [](int w) { return w < 0; })) {
    std::vector<size_t> order(tables.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return written_at[a] < written_at[b]; });
    json sorted = json::array();
    for (size_t i : order) sorted.push_back(std::move(tables[i]));
    tables = std::move(sorted);
  }
  j["tables"] = std::move(tables);

  json features = json::array();
  for (const FeatureSpec& f : s.features) {
    json pf;
    if (f.pooling_factor.fixed) {
      pf = f.pooling_factor.max;
    } else {
      pf = {{"mean", f.pooling_factor.mean}, {"max", f.pooling_factor.max}};
    }
    features.push_back({{"name", f.name},
                        {"pooling_factor", std::move(pf)},
                        {"ids",
                         {{"distribution", to_string(f.ids.kind)},
                          {"alpha", f.ids.alpha},
                          {"permute", f.ids.permute},
                          {"permute_seed", f.ids.permute_seed}}}});
  }
  j["features"] = std::move(features);

  j["batch_size"] = s.batch_size;
  j["steps"] = s.steps;
  j["warmup_steps"] = s.warmup_steps;
  j["seed"] = s.seed;
  j["devices"] = {{"count", s.devices.count},
                  {"backend", to_string(s.devices.backend)},
                  {"memory_bytes", s.devices.memory_bytes}};
  if (!s.devices.hardware.empty()) j["devices"]["hardware"] = s.devices.hardware;
  if (s.devices.host_memory_bytes != kDefaultHostMemoryBytes) j["devices"]["host_memory_bytes"] = s.devices.host_memory_bytes;
  if (s.devices.ranks_per_gpu != 0) j["devices"]["ranks_per_gpu"] = s.devices.ranks_per_gpu;
  const OptimizerSpec& o = s.optimizer;
  j["optimizer"] = {{"type", to_string(o.type)}, {"learning_rate", o.learning_rate},
                    {"eps", o.eps},              {"beta1", o.beta1},
                    {"beta2", o.beta2}};
  if (o.dense_learning_rate != -1.0) j["optimizer"]["dense_learning_rate"] = o.dense_learning_rate;

  if (s.dense) {
    const DenseSpec& d = *s.dense;
    j["dense"] = {{"num_dense_features", d.num_dense_features},
                  {"bottom_mlp", d.bottom_mlp},
                  {"interaction", to_string(d.interaction)},
                  {"top_mlp", d.top_mlp},
                  {"bucket_cap_bytes", d.bucket_cap_bytes}};
    if (d.interaction == Interaction::dcn) {
      j["dense"]["dcn"] = {{"num_layers", d.dcn_num_layers}, {"low_rank_dim", d.dcn_low_rank_dim}};
    }
    // written when not the default, so that an fp32 workload's JSON (and its session) is as before
    if (d.precision != DensePrecision::fp32) j["dense"]["precision"] = to_string(d.precision);
  } else {
    j["dense"] = nullptr;
  }

  json per_table = json::object();
  for (const auto& [name, ts] : s.sharding.per_table) {
    json e = {{"type", to_string(ts.type)}};
    if (!ts.ranks.empty()) e["ranks"] = ts.ranks;
    if (ts.node != -1) e["node"] = ts.node;
    if (ts.hot_rows_sample_steps > 0)
      e["hot_rows"] = {{"auto", true}, {"sample_steps", ts.hot_rows_sample_steps}};
    else if (!ts.hot_rows.empty())
      e["hot_rows"] = ts.hot_rows;
    per_table[name] = std::move(e);
  }
  j["sharding"] = {{"default", to_string(s.sharding.default_type)},
                   {"local_world_size", s.sharding.local_world_size},
                   {"tables", std::move(per_table)}};
  j["invalid_ids"] = to_string(s.invalid_ids);
  j["collective_timeout_ms"] = s.collective_timeout_ms;
  j["memory"] = {{"allocator", enum_name(s.memory.allocator)},
                 {"max_split_size", s.memory.max_split_size},
                 {"compaction", s.memory.compaction}};
  // only where set: the workloads written before the key existed keep their JSON
  if (s.memory.garbage_collection_threshold != 0)
    j["memory"]["garbage_collection_threshold"] = s.memory.garbage_collection_threshold;
  j["pipeline"] = enum_name(s.pipeline);
  j["qcomms"] = {{"forward_precision", enum_name(s.qcomms.forward_precision)},
                 {"backward_precision", enum_name(s.qcomms.backward_precision)}};
  j["network"] = json::object();
  for (const auto& [name, link] : {std::pair{"intra_node", &s.network.intra_node}, {"inter_node", &s.network.inter_node}}) {
    if (!link->limited()) continue;  // absent = unlimited
    json l = json::object();
    if (link->bandwidth_bytes_per_s > 0) l["bandwidth_bytes_per_s"] = link->bandwidth_bytes_per_s;
    l["latency_ns"] = link->latency_ns;
    j["network"][name] = std::move(l);
  }
  if (s.input.kind == InputKind::kjt) {
    j["input"] = {{"kind", enum_name(s.input.kind)}, {"path", s.input.paths.at(0)}, {"on_short", enum_name(s.input.on_short)}};
  } else if (s.input.kind != InputKind::synthetic) {  // absent = synthetic
    j["input"] = {{"kind", enum_name(s.input.kind)},
                  {"paths", s.input.paths},
                  {"malformed_lines", enum_name(s.input.malformed_lines)},
                  {"on_short", enum_name(s.input.on_short)},
                  {"categorical", enum_name(s.input.categorical)}};
  }
  if (s.rebalance.enabled()) j["rebalance"] = workload_detail::rebalance_to_json(s.rebalance);  // absent = off
  return j;
}


}  // namespace embedscope::engine
