// Storage options the planner may use when nothing fits as written (planner/storage_fallback.h).
#include "embedscope/engine/planner/storage_fallback.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/model/host_cache.h"
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/read_file.h"
#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

using nlohmann::json;

const char* to_string(StorageOption o) {
  switch (o) {
    case StorageOption::fp16: return "fp16";
    case StorageOption::bf16_state: return "bf16_state";
    case StorageOption::int8: return "int8";
    case StorageOption::host_cached: return "host_cached";
  }
  return "?";
}

std::vector<StorageOption> storage_options_from_strings(const std::vector<std::string>& values) {
  std::vector<StorageOption> out;
  for (const std::string& v : values) {
    std::optional<StorageOption> o;
    for (StorageOption c : kStorageOptions)
      if (v == to_string(c)) o = c;
    if (!o)
      throw SpecError(fmt::format("--allow-storage: unknown option '{}' (expected fp16, bf16_state, int8, host_cached)", v));
    if (std::find(out.begin(), out.end(), *o) == out.end()) out.push_back(*o);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

bool eligible(const WorkloadSpec& spec, const TableSpec& t, StorageOption o) {
  if (t.placement != TablePlacement::device || t.low_rank_dim > 0) return false;
  switch (o) {
    case StorageOption::fp16: return t.data_type == TableDataType::fp32;
    case StorageOption::bf16_state:  // sgd keeps no state (validate refuses a state type with it)
      return spec.optimizer.type != OptimizerType::sgd && t.optimizer_state_type == OptimizerStateType::fp32;
    case StorageOption::int8:
      return t.data_type == TableDataType::fp32 || t.data_type == TableDataType::fp16 ||
             t.data_type == TableDataType::bf16;
    case StorageOption::host_cached:
      return t.data_type == TableDataType::fp32 && t.optimizer_state_type == OptimizerStateType::fp32 &&
             !spec.rebalance.enabled();
  }
  return false;
}

void apply(TableSpec& t, StorageOption o, double clf) {
  switch (o) {
    case StorageOption::fp16: t.data_type = TableDataType::fp16; break;
    case StorageOption::bf16_state: t.optimizer_state_type = OptimizerStateType::bf16; break;
    case StorageOption::int8: t.data_type = TableDataType::int8; break;
    case StorageOption::host_cached:
      t.placement = TablePlacement::host_cached;
      t.cache_load_factor = clf;
      break;
  }
}

// The eligible tables of option o, largest device bytes as written first (ties: spec order).
std::vector<size_t> by_size(const WorkloadSpec& spec, StorageOption o) {
  std::vector<size_t> out;
  std::vector<int64_t> bytes(spec.tables.size(), 0);
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    const TableSpec& t = spec.tables[i];
    if (!eligible(spec, t, o)) continue;
    bytes[i] = shard_weight_bytes(t, t.rows(), t.embedding_dim) +
               shard_optimizer_state_bytes(spec.optimizer.type, t, t.rows(), t.embedding_dim);
    out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  return out;
}

// A table's bytes under the plan `tp` places it by. A host_cached table's row index (8 B a row, 16
// B with lfu) is kept per shard over the shard's rows: a column_wise table over 4 ranks keeps 4
// full indexes (tester44 F14: one was counted, 695.7 MiB where the run holds 927.5 MiB).
TableBytes table_bytes(const WorkloadSpec& spec, const TableStorageEstimate& e, const TablePlan& tp) {
  const TableSpec& t = spec.tables[static_cast<size_t>(e.table)];
  int64_t index_rows = 0;
  for (const Shard& sh : tp.shards) index_rows += sh.num_rows;
  if (tp.shards.empty()) index_rows = e.rows;
  TableBytes b;
  b.cache = e.cache_bytes;
  if (t.placement == TablePlacement::device) {
    b.weights = e.weight_bytes;
    b.optimizer_state = e.optimizer_state_bytes;
  } else {
    b.host = e.weight_bytes + e.optimizer_state_bytes;
    if (t.placement == TablePlacement::host_cached) b.host += 8 * index_rows * (t.cache_policy == CachePolicy::lfu ? 2 : 1);
  }
  return b;
}

// One attempt: plan_search of a changed spec; nullopt when it does not fit (or is invalid),
// with the NoPlanFits it threw in *misfit.
struct Attempt {
  std::optional<PlanSearchResult> fit;
  std::optional<NoPlanFits> misfit;
  std::string invalid;  // validate's message when the changed workload is refused
};

class Trial {
 public:
  Trial(const WorkloadSpec& spec, const HardwareProfile& hw, const PlanSearchOptions& options)
      : spec_(spec), hw_(hw), options_(options) {}
  WorkloadSpec changed(const std::vector<size_t>& tables, size_t k, StorageOption o, double clf) const {
    WorkloadSpec s = spec_;
    for (size_t j = 0; j < k; ++j) apply(s.tables[tables[j]], o, clf);
    return s;
  }
  Attempt run(const WorkloadSpec& s) {
    ++searches;
    Attempt a;
    try {
      validate(s, "the workload with the storage changes");
    } catch (const SpecError& e) {
      a.invalid = e.what();
      return a;
    }
    try {
      a.fit = plan_search(s, hw_, options_);
    } catch (const NoPlanFits& e) {
      a.misfit = e;
    }
    return a;
  }
  int searches = 0;

 private:
  const WorkloadSpec& spec_;
  const HardwareProfile& hw_;
  const PlanSearchOptions& options_;
};

// A refusal's text for `plan --auto` (which has just searched every plan): its "to try" line
// (planner.cpp check_fits: `plan --auto`, --allow-storage, row_wise / column_wise ...) replaced
// by what the search leaves to the user (tester61b F11: the advice to run what was just run).
std::string without_auto_advice(const std::string& what) {
  const std::string head = "\n  to try: `plan --auto`";
  const size_t at = what.find(head);
  if (at == std::string::npos) return what;
  const size_t end = what.find('\n', at + 1);
  return what.substr(0, at) + "\n  to try: more devices (--devices) or a larger devices.memory_bytes" +
         (end == std::string::npos ? std::string() : what.substr(end));
}

int64_t fullest(const PlanStats& st) {
  int64_t m = 0;
  for (const auto& r : st.ranks) m = std::max(m, r.hbm_bytes);
  return m;
}

int64_t device_bytes(const WorkloadSpec& spec, const std::vector<size_t>& tables) {
  int64_t sum = 0;
  for (size_t i : tables) {
    const TableSpec& t = spec.tables[i];
    if (t.placement == TablePlacement::host_cached) {
      sum += cache_device_bytes(t.cache_load_factor, t.rows(), t.embedding_dim);
    } else if (t.placement == TablePlacement::device) {
      sum += shard_weight_bytes(t, t.rows(), t.embedding_dim) +
             shard_optimizer_state_bytes(spec.optimizer.type, t, t.rows(), t.embedding_dim);
    }
  }
  return sum;
}

// What one option alone gives (the --allow-storage search of plan_search_with_storage, also the
// refusal's line of that option, so that the line describes the plan the flag gives): at each
// cache_load_factor in turn (host_cached; else one pass), all eligible tables changed; when that
// leaves kStorageHeadroom free, the smallest k whose k largest do (more tables changed never need
// more bytes). `best` the plan found; else `last` is the attempt with every table changed at the
// last load factor tried.
struct OptionOutcome {
  std::vector<size_t> tables;  // the eligible tables, largest first
  size_t k = 0;                // tables changed in `best`: tables[0..k)
  double clf = 0;              // host_cached: the load factor of `best` (else of `last`)
  std::optional<PlanSearchResult> best;
  Attempt last;
};

bool roomy(const WorkloadSpec& spec, const Attempt& a) {
  return a.fit && static_cast<double>(fullest(a.fit->stats)) <=
                      (1.0 - kStorageHeadroom) * static_cast<double>(spec.devices.memory_bytes);
}

OptionOutcome search_option(Trial& trial, const WorkloadSpec& spec, StorageOption o) {
  OptionOutcome out;
  out.tables = by_size(spec, o);
  if (out.tables.empty()) return out;
  const std::vector<double> clfs = o == StorageOption::host_cached
                                       ? std::vector<double>(std::begin(kHostCacheLoadFactors), std::end(kHostCacheLoadFactors))
                                       : std::vector<double>{0.0};
  for (double clf : clfs) {
    out.clf = clf;
    Attempt all = trial.run(trial.changed(out.tables, out.tables.size(), o, clf));
    if (!roomy(spec, all)) {
      out.last = std::move(all);
      continue;
    }
    // the smallest k whose k largest tables fit (hi fits; lo does not: 0 tables is as written)
    size_t lo = 0, hi = out.tables.size();
    PlanSearchResult best = std::move(*all.fit);
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      Attempt a = trial.run(trial.changed(out.tables, mid, o, clf));
      if (roomy(spec, a)) hi = mid, best = std::move(*a.fit);
      else lo = mid;
    }
    out.k = hi;
    out.best = std::move(best);
    return out;
  }
  return out;
}

// The refusal's line of option o: what search_option gave.
std::string outcome_line(const WorkloadSpec& spec, const Trial& trial, StorageOption o, const OptionOutcome& r) {
  std::string line = fmt::format("  --allow-storage {}: ", to_string(o));
  if (r.tables.empty()) return line + "no table can take it";
  const size_t n = r.tables.size();
  const size_t k = r.best ? r.k : n;
  const std::vector<size_t> changed(r.tables.begin(), r.tables.begin() + static_cast<std::ptrdiff_t>(k));
  line += fmt::format("{}{} table{}{}, {} -> {} on the devices; ", k < n ? fmt::format("the {} largest of ", k) : "", n,
                      n == 1 ? "" : "s",
                      o == StorageOption::host_cached ? fmt::format(" at cache_load_factor {}", r.clf) : "",
                      format_bytes(device_bytes(spec, changed)),
                      format_bytes(device_bytes(trial.changed(r.tables, k, o, r.clf), changed)));
  if (r.best)
    return line + fmt::format("a plan fits ({}, fullest rank {})", r.best->proposer, format_bytes(fullest(r.best->stats)));
  if (r.last.fit)
    return line + fmt::format("no plan leaves the {:.0f} % headroom free ({}'s fullest rank {} > {})",
                              100 * kStorageHeadroom, r.last.fit->proposer, format_bytes(fullest(r.last.fit->stats)),
                              format_bytes(static_cast<int64_t>((1.0 - kStorageHeadroom) *
                                                                static_cast<double>(spec.devices.memory_bytes))));
  if (r.last.misfit)
    return line + fmt::format("still no plan fits (the nearest, {}, is {} over{})", r.last.misfit->proposer,
                              format_bytes(r.last.misfit->overflow_bytes),
                              r.last.misfit->overflow_measure.empty() ? std::string()
                              : r.last.misfit->overflow_measure == "allocator reserve"
                                  ? " in its allocator's reserve"
                                  : " in bytes");
  return line + "refused: " + r.last.invalid;
}

}  // namespace

std::string storage_suggestions(const WorkloadSpec& spec, const HardwareProfile& hw, const PlanSearchOptions& options,
                                const std::vector<StorageOption>& allowed) {
  const std::vector<StorageOption> opts =
      allowed.empty() ? std::vector<StorageOption>(std::begin(kStorageOptions), std::end(kStorageOptions)) : allowed;
  Trial trial(spec, hw, options);
  std::string out;
  for (StorageOption o : opts) out += outcome_line(spec, trial, o, search_option(trial, spec, o)) + "\n";
  return out;
}

StoragePlanResult plan_search_with_storage(const WorkloadSpec& spec, const HardwareProfile& hw,
                                           const PlanSearchOptions& options, const std::vector<StorageOption>& allowed) {
  StoragePlanResult res;
  std::optional<NoPlanFits> as_written;
  try {
    res.search = plan_search(spec, hw, options);
    res.spec = spec;
    res.searches = 1;
    return res;
  } catch (const NoPlanFits& e) {
    as_written = e;
  }
  Trial trial(spec, hw, options);
  // the order of accuracy cost, whatever the order of `allowed`; the refusal's lines are these outcomes
  std::string tried;
  for (StorageOption o : kStorageOptions) {
    if (std::find(allowed.begin(), allowed.end(), o) == allowed.end()) continue;
    OptionOutcome oc = search_option(trial, spec, o);
    if (!oc.best) {
      tried += outcome_line(spec, trial, o, oc) + "\n";
      continue;
    }
    const size_t hi = oc.k;
    const double clf = oc.clf;
    const std::vector<size_t>& tables = oc.tables;
    res.spec = trial.changed(tables, hi, o, clf);
    res.search = std::move(*oc.best);
    res.why = without_auto_advice(as_written->what());
    res.searches = 1 + trial.searches;
    const auto before = estimate_table_storage(spec, res.search.plan);
    const auto after = estimate_table_storage(res.spec, res.search.plan);
    for (size_t j = 0; j < hi; ++j) {
      const size_t i = tables[j];
      StorageChange c;
      c.table = static_cast<int>(i);
      c.name = spec.tables[i].name;
      c.option = o;
      c.data_type_before = spec.tables[i].data_type;
      c.data_type_after = res.spec.tables[i].data_type;
      c.placement_before = spec.tables[i].placement;
      c.placement_after = res.spec.tables[i].placement;
      c.state_before = spec.tables[i].optimizer_state_type;
      c.state_after = res.spec.tables[i].optimizer_state_type;
      c.cache_load_factor = o == StorageOption::host_cached ? clf : 0.0;
      c.before = table_bytes(spec, before[i], res.search.plan.tables[i]);
      c.after = table_bytes(res.spec, after[i], res.search.plan.tables[i]);
      res.changes.push_back(c);
    }
    return res;
  }
  // the options not allowed, each alone, as a refusal without --allow-storage lists them all
  // (tester61b F4: --allow-storage fp16,int8 dropped the host_cached line that fits)
  std::vector<StorageOption> others;
  for (StorageOption o : kStorageOptions)
    if (std::find(allowed.begin(), allowed.end(), o) == allowed.end()) others.push_back(o);
  const char* others_head = "storage options the planner may use (not allowed; each option alone, on the fewest of the "
                            "largest tables that make a plan fit, as --allow-storage OPTION would change them):\n";
  const std::string what =
      without_auto_advice(as_written->what()) +
      (allowed.empty() ? "\n" + std::string(others_head) + storage_suggestions(spec, hw, options, others)
                       : "\nthe allowed storage options do not make it fit either (every table that can take each):\n" +
                             tried +
                             (others.empty() ? std::string()
                                             : std::string(others_head) + storage_suggestions(spec, hw, options, others)));
  throw NoPlanFits(what.substr(0, what.size() - 1), as_written->proposer, as_written->overflow_bytes,
                   as_written->fullest_rank_bytes, as_written->overflow_measure);
}

json storage_changes_json(const StoragePlanResult& r) {
  json out = json::object();
  if (r.changes.empty()) return out;
  json arr = json::array();
  for (const StorageChange& c : r.changes) {
    auto side = [](TableDataType dt, TablePlacement pl, const TableBytes& b) {
      return json{{"data_type", to_string(dt)},        {"placement", to_string(pl)},
                  {"weights_bytes", b.weights},        {"optimizer_state_bytes", b.optimizer_state},
                  {"cache_bytes", b.cache},            {"host_bytes", b.host}};
    };
    json e = {{"table", c.name}, {"option", to_string(c.option)}, {"data_type", to_string(c.data_type_after)},
              {"placement", to_string(c.placement_after)}};
    if (c.placement_after == TablePlacement::host_cached) e["cache_load_factor"] = c.cache_load_factor;
    e["before"] = side(c.data_type_before, c.placement_before, c.before);
    e["after"] = side(c.data_type_after, c.placement_after, c.after);
    if (c.state_after != c.state_before) {  // bf16_state
      e["optimizer_state_type"] = enum_name(c.state_after);
      e["before"]["optimizer_state_type"] = enum_name(c.state_before);
      e["after"]["optimizer_state_type"] = enum_name(c.state_after);
    }
    arr.push_back(e);
  }
  out["storage_changes"] = arr;
  out["storage_reason"] = r.why;
  out["storage_searches"] = r.searches;
  return out;
}

std::string storage_changes_text(const StoragePlanResult& r) {
  if (r.changes.empty()) return "";
  std::string out = fmt::format(
      "storage changed by the planner (--allow-storage; {} table{}, the largest first; {} searches) because nothing "
      "fits as written:\n  {}\n",
      r.changes.size(), r.changes.size() == 1 ? "" : "s", r.searches, r.why);
  out += fmt::format("  {:<20} {:<22} {:>24} {:>18} {:>12} {:>12}\n", "table", "storage", "weights", "optimizer state",
                     "device cache", "host");
  for (const StorageChange& c : r.changes) {
    const std::string after = c.placement_after == TablePlacement::host_cached
                                  ? fmt::format("host_cached {}", c.cache_load_factor)
                                  : std::string(to_string(c.data_type_after));
    const std::string storage = c.state_after != c.state_before
                                    ? fmt::format("{} state -> {} state", enum_name(c.state_before), enum_name(c.state_after))
                                    : fmt::format("{} -> {}", to_string(c.data_type_before), after);
    out += fmt::format("  {:<20} {:<22} {:>24} {:>18} {:>12} {:>12}\n", c.name, storage,
                       format_bytes(c.before.weights) + " -> " + format_bytes(c.after.weights),
                       format_bytes(c.before.optimizer_state) + " -> " + format_bytes(c.after.optimizer_state),
                       format_bytes(c.after.cache), format_bytes(c.after.host));
  }
  return out;
}

void apply_storage_changes(WorkloadSpec& spec, const json& doc, const std::string& origin) {
  if (!doc.is_object() || !doc.contains("storage_changes")) return;
  const json& arr = doc.at("storage_changes");
  auto fail = [&](const std::string& where, const std::string& why) {
    throw SpecError(fmt::format("{}: {}: {}", origin, where, why));
  };
  if (!arr.is_array()) fail("/storage_changes", "must be an array (as `plan --auto --allow-storage ... --json` prints)");
  for (size_t k = 0; k < arr.size(); ++k) {
    const json& e = arr[k];
    const std::string where = fmt::format("/storage_changes/{}", k);
    if (!e.is_object() || !e.contains("table") || !e.at("table").is_string()) fail(where + "/table", "must name a table");
    const std::string name = e.at("table").get<std::string>();
    auto it = std::find_if(spec.tables.begin(), spec.tables.end(), [&](const TableSpec& t) { return t.name == name; });
    if (it == spec.tables.end()) fail(where + "/table", fmt::format("the workload has no table \"{}\"", name));
    if (e.contains("data_type")) {
      if (!e.at("data_type").is_string()) fail(where + "/data_type", "must be a string");
      it->data_type = enum_from_string<TableDataType>(e.at("data_type").get<std::string>(), origin + ": " + where + "/data_type");
    }
    if (e.contains("placement")) {
      if (!e.at("placement").is_string()) fail(where + "/placement", "must be a string");
      it->placement = enum_from_string<TablePlacement>(e.at("placement").get<std::string>(), origin + ": " + where + "/placement");
    }
    if (e.contains("optimizer_state_type")) {
      if (!e.at("optimizer_state_type").is_string()) fail(where + "/optimizer_state_type", "must be a string");
      it->optimizer_state_type = enum_from_string<OptimizerStateType>(e.at("optimizer_state_type").get<std::string>(),
                                                                      origin + ": " + where + "/optimizer_state_type");
    }
    if (e.contains("cache_load_factor")) {
      if (!e.at("cache_load_factor").is_number()) fail(where + "/cache_load_factor", "must be a number");
      it->cache_load_factor = e.at("cache_load_factor").get<double>();
    }
  }
  validate(spec, origin + " (its storage_changes applied to the workload)");
}

void apply_plan_file_storage(WorkloadSpec& spec, const std::string& plan_file) {
  // read here first: a directory named `--plan d: is a directory, not a plan file` (tester47 F4)
  const json doc = json::parse(read_whole_file(plan_file, "--plan ", "plan file"), nullptr, false);
  if (doc.is_discarded()) return;
  apply_storage_changes(spec, doc, plan_file);
}

}  // namespace embedscope::engine
