#include "core/tradeoff_figures.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/enums.h"
#include "embedscope/sessions/analysis/noise.h"
#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::ui {

using nlohmann::json;

namespace {

// 10000 -> "10,000"
std::string tradeoff_thousands(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return v < 0 ? "-" + s : s;
}

int64_t tradeoff_sum(const json& a) {
  int64_t s = 0;
  if (a.is_array())
    for (const auto& v : a)
      if (v.is_number_integer()) s += v.get<int64_t>();
  return s;
}

// "fp16 rows" when every table has it, "fp16 rows (3 of 8 tables)" when some do; the most
// frequent non-default value names the setting when tables differ among themselves.
std::string tradeoff_setting(const std::map<std::string, int64_t>& counts, int64_t tables) {
  if (counts.empty()) return "";
  auto most = std::max_element(counts.begin(), counts.end(), [](auto& a, auto& b) { return a.second < b.second; });
  int64_t with = 0;
  for (const auto& [v, n] : counts) with += n;
  std::string s = counts.size() == 1 ? most->first : most->first + " and others";
  if (with < tables) s += fmt::format(" ({} of {} tables)", with, tables);
  return s;
}

// The tables named shared_with another in the session's workload (workload_json), 0 when absent.
int64_t tradeoff_shared_tables(const sessions::SessionReader& session) {
  const json w = json::parse(session.meta(sessions::meta::kWorkloadJson, "{}"), nullptr, false);
  int64_t n = 0;
  if (w.is_object() && w.contains("tables") && w["tables"].is_array())
    for (const auto& t : w["tables"])
      if (t.is_object() && t.contains("shared_with")) ++n;
  return n;
}

std::string tradeoff_lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

TradeoffRun tradeoff_run(const std::string& label, const sessions::SessionReader& session) {
  TradeoffRun r;
  r.label = label;
  r.ended = session.status();
  // steps: the slowest rank's window per measured step, and the step's loss
  std::map<int64_t, std::pair<int64_t, double>> steps;  // step -> (longest window ns, loss)
  for (const auto& s : session.steps()) {
    if (s.step < 0) continue;
    auto& [longest, loss] = steps[s.step];
    longest = std::max(longest, s.end_ns - s.start_ns);
    loss = s.loss;
  }
  r.steps = static_cast<int64_t>(steps.size());
  double total = 0;
  for (const auto& [step, w] : steps) {
    total += static_cast<double>(w.first);
    r.losses.push_back(w.second);
  }
  r.step_mean_ns = r.steps > 0 ? total / static_cast<double>(r.steps) : 0;
  for (const auto& m : session.memory_counters())
    if (r.peak_rank < 0 || m.peak_allocated > r.peak_allocated_bytes) {
      r.peak_allocated_bytes = m.peak_allocated;
      r.peak_rank = m.rank;
    }
  // the held-out evaluation: {"auc": null} (one class) and {"skipped": ...} have no AUC
  const json held = json::parse(session.meta(sessions::meta::kHeldOutJson, ""), nullptr, false);
  if (held.is_object() && held.contains("auc") && held["auc"].is_number()) {
    r.has_held_out = true;
    r.held_out_auc = held["auc"].get<double>();
    r.held_out_loss = held.value("loss", 0.0);
    r.held_out_samples = held.value("samples", int64_t{0});
    r.held_out_auc_se = sessions::held_out_auc_se(session).value_or(0.0);
  }
  // the tables' storage
  const json tables = json::parse(session.meta(sessions::meta::kTableStorageJson, ""), nullptr, false);
  const int64_t shared = tradeoff_shared_tables(session);
  if (!tables.is_array()) {
    r.technique = "no table storage recorded";
    return r;
  }
  r.has_storage = true;
  r.tables = static_cast<int64_t>(tables.size());
  std::map<std::string, int64_t> rows, state, hashed, low_rank;
  for (const auto& t : tables) {
    if (!t.is_object()) continue;
    r.weight_bytes += tradeoff_sum(t.value("weight_bytes", json::array()));
    r.optimizer_state_bytes += tradeoff_sum(t.value("optimizer_state_bytes", json::array()));
    if (t.contains("max_abs_error") && !t["max_abs_error"].is_number()) {  // null: not measured (simulated)
      r.errors_measured = false;
    } else {
      r.max_abs_error = std::max(r.max_abs_error, t.value("max_abs_error", 0.0));
      r.relative_error = std::max(r.relative_error, t.value("relative_error", 0.0));
      r.hash_collisions += t.value("hash_collisions", int64_t{0});
    }
    if (const std::string dt = t.value("data_type", "fp32"); dt != "fp32")
      ++rows[dt + (t.value("stochastic_rounding", false) ? " rows, stochastic rounding" : " rows")];
    if (const std::string st = t.value("optimizer_state_type", "fp32"); st != "fp32") ++state[st + " state"];
    if (const int64_t h = t.value("hash_size", int64_t{0}); h > 0) ++hashed["hash " + tradeoff_thousands(h) + " rows"];
    if (const int64_t k = t.value("low_rank_dim", int64_t{0}); k > 0) ++low_rank["low rank " + std::to_string(k)];
  }
  std::vector<std::string> parts;
  for (const auto* counts : {&rows, &state, &hashed, &low_rank})
    if (std::string s = tradeoff_setting(*counts, r.tables); !s.empty()) parts.push_back(std::move(s));
  if (shared > 0)
    parts.push_back(fmt::format("{} table{} shared", shared, shared == 1 ? "" : "s"));
  if (parts.empty()) parts.push_back("fp32");
  r.technique = fmt::format("{}", fmt::join(parts, ", "));
  return r;
}

TradeoffComparison compare_tradeoffs(std::vector<TradeoffRun> runs) {
  TradeoffComparison c;
  c.runs = std::move(runs);
  for (size_t i = 0; i < c.runs.size(); ++i)
    if (tradeoff_lower(c.runs[i].label) == "fp32") {
      c.reference = i;
      break;
    }
  int64_t n = 0;
  for (const auto& r : c.runs)
    if (r.steps > 0) n = n == 0 ? r.steps : std::min(n, r.steps);
  c.loss_steps = n;
  for (auto& r : c.runs) {
    r.has_loss = n > 0 && r.steps >= n;
    r.loss = r.has_loss ? r.losses[static_cast<size_t>(n - 1)] : 0;
  }
  if (!c.runs.empty() && c.runs[c.reference].has_held_out)
    for (auto& r : c.runs)
      if (r.has_held_out) {
        const TradeoffRun& ref = c.runs[c.reference];
        r.held_out_auc_delta = r.held_out_auc - ref.held_out_auc;
        if (r.held_out_auc_se > 0 && ref.held_out_auc_se > 0) {
          const auto d = sessions::auc_difference(r.held_out_auc, r.held_out_auc_se, ref.held_out_auc, ref.held_out_auc_se);
          r.held_out_auc_delta_se = d.se;
          r.held_out_auc_delta_within_noise = d.within_noise;
        }
      }
  if (c.runs.empty() || !c.runs[c.reference].has_loss) return c;
  const double ref = c.runs[c.reference].loss;
  for (auto& r : c.runs) {
    if (!r.has_loss) continue;
    r.loss_delta = r.loss - ref;
    r.loss_relative = ref != 0 ? r.loss_delta / ref : 0;
  }
  return c;
}

namespace {
double tradeoff_ratio(double v, double ref) { return ref != 0 ? v / ref : 0; }
}  // namespace

double TradeoffComparison::table_bytes_ratio(size_t run) const {
  return tradeoff_ratio(static_cast<double>(runs[run].table_bytes()), static_cast<double>(runs[reference].table_bytes()));
}
double TradeoffComparison::peak_ratio(size_t run) const {
  return tradeoff_ratio(static_cast<double>(runs[run].peak_allocated_bytes), static_cast<double>(runs[reference].peak_allocated_bytes));
}
double TradeoffComparison::step_time_ratio(size_t run) const {
  return tradeoff_ratio(runs[run].step_mean_ns, runs[reference].step_mean_ns);
}

bool runs_differ_in_table_storage(const engine::Scenario& scenario) {
  // per DLRM run: each table's storage settings, by table name
  using Storage = std::tuple<std::string, std::string, int64_t, int64_t, std::set<std::string>>;
  std::vector<std::map<std::string, Storage>> runs;
  for (const auto& run : scenario.runs) {
    if (run.lm) continue;
    std::map<std::string, Storage> tables;
    for (const auto& t : run.spec.tables) {
      std::set<std::string> shared;
      for (const auto& s : t.shared_tables) shared.insert(s.name);
      // the data type with its rounding (fp16 rows rounded stochastically store them differently)
      tables[t.name] = {std::string(engine::enum_name(t.data_type)) + (t.uses_stochastic_rounding() ? "+sr" : ""),
                        engine::enum_name(t.optimizer_state_type), t.hash_size, t.low_rank_dim, shared};
      for (const auto& s : shared) tables[s] = {"shared_with", t.name, 0, 0, {}};
    }
    runs.push_back(std::move(tables));
  }
  if (runs.size() < 2) return false;
  for (size_t i = 1; i < runs.size(); ++i)
    for (const auto& [name, storage] : runs[i])
      if (auto it = runs[0].find(name); it != runs[0].end() && it->second != storage) return true;
  return false;
}

}  // namespace embedscope::ui
