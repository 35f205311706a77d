// Text and JSON shared by the commands (output.h).

#include "output.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "embedscope/engine/cost/run_setup_text.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_ms

#include <fmt/format.h>

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string ms(double ns) { return sessions::format_ms(ns); }
std::string ms(int64_t ns) { return ms(static_cast<double>(ns)); }

// the engine's words (cost/run_setup_text.h), which the workbench's Summary shows too
std::string network_text(const es::NetworkSpec& n) { return es::emulated_network_text(n); }

std::string pipeline_text(const es::WorkloadSpec& spec) {
  // the words are the engine's (cost/run_setup_text.h), which the workbench's Summary shows too
  const es::RunSetupText t = es::run_setup_text(spec);
  return fmt::format("pipeline     {}\nnetwork      {}\n{}", t.pipeline, t.network,
                     t.dense.empty() ? std::string() : fmt::format("dense        {}\n", t.dense));
}

json pipeline_json(const es::WorkloadSpec& spec) {
  const json w = es::to_json(spec);
  return {{"pipeline", w.at("pipeline")},
          {"qcomms", w.at("qcomms")},
          {"network", w.at("network")},
          {"dense_precision", spec.dense ? json(es::to_string(spec.dense->precision)) : json()}};
}

std::string plan_table(const es::WorkloadSpec& spec, const es::ShardingPlan& plan) {
  std::string out = fmt::format("{:<24} {:<17} {}\n", "table", "sharding", "shards (rank: rows x cols @ row,col)");
  for (const auto& tp : plan.tables) {
    std::string shards;
    for (const auto& s : tp.shards)
      shards += fmt::format("{}{}: {}x{} @{},{}", shards.empty() ? "" : "  ", s.rank, s.num_rows, s.num_cols,
                            s.row_offset, s.col_offset);
    out += fmt::format("{:<24} {:<17} {}\n", spec.tables[static_cast<size_t>(tp.table)].name, es::to_string(tp.type),
                       shards);
  }
  return out;
}

std::string table_storage_text(const es::WorkloadSpec& spec, const es::ShardingPlan& plan) {
  const auto est = es::estimate_table_storage(spec, plan);
  // tables in host memory: where the weights and state are, and the device cache
  const bool host = std::any_of(est.begin(), est.end(), [](const auto& e) { return e.placement != es::TablePlacement::device; });
  std::string out = fmt::format("{:<24} {:<9} {:>12} {:>8} {:>9} {:>12} {:>16}", "table", "data_type", "rows",
                                "low_rank", "row bytes", "weights", "optimizer state");
  out += host ? fmt::format(" {:<11} {:>12}\n", "placement", "device cache") : std::string("\n");
  for (const auto& e : est) {
    out += fmt::format("{:<24} {:<9} {:>12} {:>8} {:>9} {:>12} {:>16}", spec.tables[static_cast<size_t>(e.table)].name,
                       es::to_string(e.data_type), e.rows,
                       e.low_rank_dim > 0 ? std::to_string(e.low_rank_dim) : std::string("-"), e.row_bytes,
                       es::format_bytes(e.weight_bytes),
                       es::format_bytes(e.optimizer_state_bytes));
    out += host ? fmt::format(" {:<11} {:>12}\n", es::to_string(e.placement), es::format_bytes(e.cache_bytes))
                : std::string("\n");
  }
  if (host)
    out += "(placement host / host_cached: weights and optimizer state in host memory, the device cache on the device)\n";
  return out;
}

std::string host_placement_text(const json& tables, int64_t steps) {
  if (!tables.is_array()) return "";
  bool any = false;
  for (const auto& t : tables) any |= t.is_object() && t.value("placement", "device") != "device";
  if (!any) return "";
  auto sum = [](const json& a) {
    int64_t s = 0;
    if (a.is_array())
      for (const auto& v : a) s += v.is_number_integer() ? v.get<int64_t>() : 0;
    return s;
  };
  const double n = steps > 0 ? static_cast<double>(steps) : 1.0;
  std::string out = fmt::format("{:<20} {:<11} {:<6} {:>6} {:>12} {:>12} {:>9} {:>12} {:>12} {:>12} {:>16}\n", "table",
                                "placement", "policy", "load", "device cache", "host", "hit rate", "rows/step", "H2D/step",
                                "D2H/step", "prefetched/step");
  for (const auto& t : tables) {
    const std::string placement = t.value("placement", "device");
    if (placement == "device") continue;
    const bool cached = placement == "host_cached";
    const int64_t hits = t.value("cache_hits", int64_t{0}), misses = t.value("cache_misses", int64_t{0});
    const bool prefetch = cached && t.value("prefetch_pipeline", false);
    out += fmt::format("{:<20} {:<11} {:<6} {:>6} {:>12} {:>12} {:>9} {:>12.0f} {:>12} {:>12} {:>16}\n", t.value("table", ""),
                       placement, cached ? t.value("cache_policy", "lru") : "-",
                       cached ? fmt::format("{:.2f}", t.value("cache_load_factor", 0.0)) : std::string("-"),
                       es::format_bytes(sum(t.value("cache_bytes", json::array()))),
                       es::format_bytes(sum(t.value("host_bytes", json::array()))),
                       cached && hits + misses > 0 ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses))
                                         : std::string("-"),
                       static_cast<double>(t.value("rows_fetched", int64_t{0})) / n,
                       es::format_bytes(static_cast<int64_t>(static_cast<double>(t.value("bytes_h2d", int64_t{0})) / n)),
                       es::format_bytes(static_cast<int64_t>(static_cast<double>(t.value("bytes_d2h", int64_t{0})) / n)),
                       prefetch ? fmt::format("{:.0f} rows", static_cast<double>(t.value("prefetched_rows", int64_t{0})) / n)
                                : std::string("-"));
  }
  return out;
}

json table_storage_estimate_json(const es::WorkloadSpec& spec, const es::ShardingPlan& plan) {
  json a = json::array();
  for (const auto& e : es::estimate_table_storage(spec, plan))
    a.push_back({{"table", spec.tables[static_cast<size_t>(e.table)].name}, {"data_type", es::to_string(e.data_type)},
                 {"rows", e.rows}, {"low_rank_dim", e.low_rank_dim}, {"row_bytes", e.row_bytes},
                 {"weight_bytes", e.weight_bytes},
                 {"optimizer_state_bytes", e.optimizer_state_bytes}, {"placement", es::to_string(e.placement)},
                 {"cache_bytes", e.cache_bytes}});
  return a;
}

std::string held_out_text(const nlohmann::json& h) {
  if (!h.is_object()) return {};
  if (h.contains("skipped")) return fmt::format("held-out     not evaluated: {}\n", h.value("skipped", std::string()));
  const std::string auc = h.value("auc", nlohmann::json()).is_number() ? fmt::format("{:.4f}", h["auc"].get<double>())
                                                                        : std::string("undefined (one class only)");
  const int64_t batches = h.value("batches", int64_t{0});
  return fmt::format("held-out     AUC {}, loss {:.4f} on {} samples ({} positive) of {} generated batch{} training "
                     "never saw\n",
                     auc, h.value("loss", 0.0), h.value("samples", int64_t{0}), h.value("positives", int64_t{0}), batches,
                     batches == 1 ? "" : "es");
}

}  // namespace embedscope::cli
