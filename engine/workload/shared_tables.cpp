#include "shared_tables.h"

#include <map>

#include <fmt/format.h>

namespace embedscope::engine::workload_detail {

void fold_shared_tables(WorkloadSpec& s, const std::vector<std::string>& shared_with, const Checker& c) {
  std::map<std::string, size_t> index;
  for (size_t t = 0; t < s.tables.size(); ++t) index.emplace(s.tables[t].name, t);
  bool any = false;
  for (size_t t = 0; t < shared_with.size(); ++t) {
    if (shared_with[t].empty()) continue;
    any = true;
    const TableSpec& tb = s.tables[t];
    const std::string p = ptr_idx("/tables", t);
    const auto it = index.find(shared_with[t]);
    if (it == index.end())
      c.fail(p + "/shared_with", fmt::format("no table named \"{}\"", shared_with[t]));
    if (it->second == t) c.fail(p + "/shared_with", fmt::format("table \"{}\" cannot share its own rows", tb.name));
    const size_t o = it->second;
    const TableSpec& owner = s.tables[o];
    if (o < shared_with.size() && !shared_with[o].empty())
      c.fail(p + "/shared_with", fmt::format("\"{}\" itself shares the rows of \"{}\" (/tables/{}/shared_with): name "
                                             "the table that owns the rows (no chains or cycles)",
                                             owner.name, shared_with[o], o));
    auto same = [&](const char* field, bool eq, const std::string& mine, const std::string& theirs) {
      if (!eq)
        c.fail(p + "/" + field, fmt::format("{} but table \"{}\" it shares (shared_with) has {}: a shared table uses "
                                            "the owner's rows and must match them",
                                            mine, owner.name, theirs));
    };
    same("num_embeddings", tb.num_embeddings == owner.num_embeddings, std::to_string(tb.num_embeddings),
         std::to_string(owner.num_embeddings));
    same("embedding_dim", tb.embedding_dim == owner.embedding_dim, std::to_string(tb.embedding_dim),
         std::to_string(owner.embedding_dim));
    same("pooling", tb.pooling == owner.pooling, to_string(tb.pooling), to_string(owner.pooling));
    same("data_type", tb.data_type == owner.data_type, to_string(tb.data_type), to_string(owner.data_type));
    same("stochastic_rounding", tb.uses_stochastic_rounding() == owner.uses_stochastic_rounding(),
         tb.uses_stochastic_rounding() ? "true" : "false", owner.uses_stochastic_rounding() ? "true" : "false");
    // hash_size and low_rank_dim 0 are "not set" (spec.h), said so rather than as a 0 (tester55 F9)
    // ("hash_size: not set but table "t" it shares (shared_with) has 100", "... has it not set")
    const auto set_or_not = [](int64_t v) { return v == 0 ? std::string("not set") : std::to_string(v); };
    const auto has_or_not = [](int64_t v) { return v == 0 ? std::string("it not set") : std::to_string(v); };
    same("hash_size", tb.hash_size == owner.hash_size, set_or_not(tb.hash_size), has_or_not(owner.hash_size));
    same("optimizer_state_type", tb.optimizer_state_type == owner.optimizer_state_type,
         enum_name(tb.optimizer_state_type), enum_name(owner.optimizer_state_type));
    same("low_rank_dim", tb.low_rank_dim == owner.low_rank_dim, set_or_not(tb.low_rank_dim),
         has_or_not(owner.low_rank_dim));
    same("placement", tb.placement == owner.placement, enum_name(tb.placement), enum_name(owner.placement));
    if (s.sharding.per_table.count(tb.name))
      c.fail(ptr_key("/sharding/tables", tb.name),
             fmt::format("table \"{}\" shares the rows of \"{}\" (shared_with): shard \"{}\" instead", tb.name,
                         owner.name, owner.name));
  }
  if (!any) return;
  std::vector<TableSpec> kept;
  std::map<std::string, size_t> kept_index;
  for (size_t t = 0; t < s.tables.size(); ++t)
    if (t >= shared_with.size() || shared_with[t].empty()) {
      kept_index.emplace(s.tables[t].name, kept.size());
      kept.push_back(s.tables[t]);
    }
  for (size_t t = 0; t < shared_with.size(); ++t) {
    if (shared_with[t].empty()) continue;
    TableSpec& owner = kept[kept_index.at(shared_with[t])];
    const TableSpec& tb = s.tables[t];
    owner.feature_names.insert(owner.feature_names.end(), tb.feature_names.begin(), tb.feature_names.end());
    owner.shared_tables.push_back({tb.name, tb.feature_names, tb.written_index});
  }
  s.tables = std::move(kept);
}

}  // namespace embedscope::engine::workload_detail
