#include "stats_tables.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "embedscope/sessions/analysis/kernel_name.h"
#include "embedscope/sessions/analysis/stragglers.h"
#include "embedscope/sessions/analysis/table_storage.h"
#include "embedscope/sessions/model/units.h"  // format_duration
#include "output/output.h"                    // ms

namespace embedscope::cli {

namespace ss = embedscope::sessions;
using nlohmann::json;

namespace {
// "  ... and K more (share S%)" for the rows from `top` on, "" when none is left out.
template <typename Rows, typename Share>
std::string rows_left_out_text(const Rows& rows, int64_t top, Share share) {
  if (top <= 0 || static_cast<int64_t>(rows.size()) <= top) return "";
  double rest = 0;
  for (size_t i = static_cast<size_t>(top); i < rows.size(); ++i) rest += share(rows[i]);
  return fmt::format("  ... and {} more (share {:.1f}%; --top 0 lists all, --json has every row)\n",
                     rows.size() - static_cast<size_t>(top), 100 * rest);
}

size_t rows_shown(size_t rows, int64_t top) {
  return top <= 0 ? rows : std::min(rows, static_cast<size_t>(top));
}
}  // namespace

std::string critical_path_rows_text(const ss::RunStats& st, const std::function<std::string(int32_t)>& shown, size_t w,
                                    int64_t top) {
  std::string out;
  for (size_t i = 0; i < rows_shown(st.critical_path.size(), top); ++i) {
    const auto& e = st.critical_path[i];
    out += fmt::format("  {:<{}} {:<10} {:>11} {:>6.1f}% {:>9} {:>14}\n", shown(e.name_id), w,
                       e.name_id < 0 ? "-" : ss::to_string(e.category), ms(e.ns), 100 * e.share, e.top_rank,
                       e.steps_bounded);
  }
  return out + rows_left_out_text(st.critical_path, top, [](const ss::CriticalPathEntry& e) { return e.share; });
}

std::string no_load_imbalance_text(const ss::RunStats& st) {
  const bool waits = !ss::straggler_text(st.peer_waits, 1).empty();
  return std::string("not measured: a trace has no load counters (the ids each rank looked up)") +
         (waits ? "; the ranks' waits for each other: straggler below" : "");
}

std::string straggler_line(const ss::RunStats& st, int64_t steps) {
  const std::string t = ss::straggler_text(st.peer_waits, steps);
  return t.empty() ? "" : "straggler    " + t + "\n";
}

std::string peer_waits_text(const ss::RunStats& st, int64_t steps) {
  if (ss::straggler_text(st.peer_waits, steps).empty()) return "";
  const int64_t per = std::max<int64_t>(1, steps);
  std::string out = fmt::format(
      "\nwaiting for peers, per rank (a collective on 2 ranks or more: from the rank's start of it to the start of its "
      "last member; times per {})\n",
      st.whole_trace ? "the whole trace" : "step");
  out += fmt::format("  {:<5} {:>11} {:>14} {:>17} {:>20}\n", "rank", "collectives", "last to arrive",
                     "waited for peers", "peers waited for it");
  for (const auto& r : st.peer_waits)
    out += fmt::format("  {:<5} {:>11} {:>14} {:>17} {:>20}\n", r.rank, r.collectives, r.last_arrivals,
                       ss::format_duration(r.waited_ns / per), ss::format_duration(r.caused_wait_ns / per));
  return out;
}

json peer_waits_json(const ss::RunStats& st, int64_t steps) {
  const int64_t per = std::max<int64_t>(1, steps);
  json j{{"ranks", json::array()}};
  for (const auto& r : st.peer_waits)
    j["ranks"].push_back({{"rank", r.rank}, {"collectives", r.collectives}, {"last_arrivals", r.last_arrivals},
                          {"waited_ns", r.waited_ns}, {"caused_wait_ns", r.caused_wait_ns}});
  const auto s = ss::straggler(st.peer_waits);
  j["straggler"] = s ? json{{"rank", s->rank}, {"last_arrivals", s->last_arrivals}, {"collectives", s->collectives},
                            {"caused_wait_ns", s->caused_wait_ns}, {"caused_wait_per_step_ns", s->caused_wait_ns / per}}
                     : json();
  const std::string t = ss::straggler_text(st.peer_waits, steps);
  j["text"] = t.empty() ? json() : json(t);
  return j;
}

namespace {
// The kernels' names as the table shows them: Nsight's short names told apart
// (distinct_short_kernel_names), cut in the middle past 72 characters.
std::vector<std::string> breakdown_names(const ss::KernelBreakdown& b, const ss::SessionReader& session, size_t rows) {
  std::vector<std::string> whole;
  for (size_t i = 0; i < rows; ++i) whole.push_back(session.name(b.kernels[i].name_id));
  auto names = ss::distinct_short_kernel_names(whole);
  constexpr size_t kMax = 72;
  for (auto& n : names)
    if (n.size() > kMax) n = n.substr(0, kMax / 2 - 2) + "..." + n.substr(n.size() - (kMax - kMax / 2 - 1));
  return names;
}
}  // namespace

std::string kernel_breakdown_text(const ss::KernelBreakdown& b, const ss::SessionReader& session, int64_t top) {
  if (b.events == 0) return "";
  std::string out = fmt::format(
      "\nGPU kernel breakdown (Holistic Trace Analysis' get_gpu_kernel_breakdown, summed over ranks; the GPU events "
      "above{}): {} of GPU event time, the shares' 100%\n",
      b.microsecond_rounding ? ", whole us" : "", ss::format_duration(b.total_ns));
  out += fmt::format("  {:<14} {:>9} {:>12} {:>7}\n", "type", "count", "total", "share");
  for (const auto& t : b.types)
    out += fmt::format("  {:<14} {:>9} {:>12} {:>6.1f}%\n", ss::importers::to_string(t.cls), t.count,
                       ss::format_duration(t.total_ns), 100 * t.share);
  const size_t n = rows_shown(b.kernels.size(), top);
  const auto names = breakdown_names(b, session, n);
  size_t w = 28;
  for (const auto& s : names) w = std::max(w, s.size());
  // at most 147 characters a row with a name cut to 72 (the critical path's width; tester34 D20)
  out += fmt::format("  {:<{}} {:<13} {:>6} {:>10} {:>7} {:>10} {:>10} {:>10}\n", "kernel", w, "type", "count", "total",
                     "share", "mean", "min", "max");
  for (size_t i = 0; i < n; ++i) {
    const auto& k = b.kernels[i];
    out += fmt::format("  {:<{}} {:<13} {:>6} {:>10} {:>6.1f}% {:>10} {:>10} {:>10}\n", names[i], w,
                       ss::importers::to_string(k.cls), k.count, ss::format_duration(k.total_ns), 100 * k.share,
                       ss::format_duration(static_cast<int64_t>(k.mean_ns)), ss::format_duration(k.min_ns),
                       ss::format_duration(k.max_ns));
  }
  return out + rows_left_out_text(b.kernels, top, [](const ss::KernelBreakdownRow& k) { return k.share; });
}

json kernel_breakdown_json(const ss::KernelBreakdown& b, const ss::SessionReader& session) {
  json j{{"total_ns", b.total_ns}, {"events", b.events}, {"microsecond_rounding", b.microsecond_rounding},
         {"types", json::array()}, {"kernels", json::array()}};
  for (const auto& t : b.types)
    j["types"].push_back({{"type", ss::importers::to_string(t.cls)}, {"count", t.count}, {"total_ns", t.total_ns},
                          {"share", t.share}});
  for (const auto& k : b.kernels)
    j["kernels"].push_back({{"name", session.name(k.name_id)}, {"type", ss::importers::to_string(k.cls)},
                            {"count", k.count}, {"total_ns", k.total_ns}, {"share", k.share}, {"mean_ns", k.mean_ns},
                            {"min_ns", k.min_ns}, {"max_ns", k.max_ns}});
  return j;
}

std::string hot_rows_none_text(const std::string& workload_json, const std::string& table_storage_json, int64_t world) {
  const nlohmann::json w = nlohmann::json::parse(workload_json, nullptr, false);
  const nlohmann::json storage = nlohmann::json::parse(table_storage_json, nullptr, false);
  if (!w.is_object() || !w.contains("sharding") || !w["sharding"].is_object() || !w["sharding"].contains("tables") ||
      !w["sharding"]["tables"].is_object() || !w.contains("tables") || !w["tables"].is_array())
    return "";
  std::string out;
  for (const auto& [name, ts] : w["sharding"]["tables"].items()) {
    if (!ts.is_object() || !ts.contains("hot_rows") || !ts["hot_rows"].is_object()) continue;
    const nlohmann::json& hr = ts["hot_rows"];
    if (!hr.value("auto", false) || !hr.contains("sample_steps") || !hr["sample_steps"].is_number_integer()) continue;
    int64_t chosen = 0, dim = 0;
    if (storage.is_array())
      for (const auto& t : storage)
        if (t.is_object() && t.value("table", "") == name) chosen = t.value("hot_rows", int64_t{0});
    for (const auto& t : w["tables"])
      if (t.is_object() && t.value("name", "") == name) dim = t.value("embedding_dim", int64_t{0});
    if (chosen > 0 || dim <= 0) continue;
    const int64_t n = hr["sample_steps"].get<int64_t>();
    out += fmt::format("hot rows     {}: none chosen (no row had more than W x (dim + 1) = {} x {} = {} ids a step in "
                       "the first {} iteration{}; every row of the table stays sharded)\n",
                       name, world, dim + 1, world * (dim + 1), n, n == 1 ? "" : "s");
  }
  return out;
}

std::string table_storage_text(const std::string& meta, int64_t steps) {
  const std::vector<ss::TableStorageRow> rows = ss::table_storage_rows(meta, steps);  // the workbench's Summary reads the same
  bool any = false;
  for (const auto& r : rows) any |= r.data_type != "fp32" || r.hash_size > 0 || r.low_rank_dim > 0 || r.state != "fp32";
  if (!any) return "";
  auto or_dash = [](const std::optional<double>& v, const char* f) {
    return v ? fmt::format(fmt::runtime(f), *v) : std::string("-");
  };
  std::string out = fmt::format("\n{:<20} {:<9} {:<10} {:<5} {:>10} {:>8} {:>12} {:>16} {:>12} {:>14} {:>10} {:>16}\n",
                                "table", "data_type", "rounding", "state", "hash_size", "low_rank", "weights", "optimizer state", "master copy",
                                "max abs error", "relative", "collisions/step");
  for (const auto& r : rows)
    out += fmt::format("{:<20} {:<9} {:<10} {:<5} {:>10} {:>8} {:>12} {:>16} {:>12} {:>14} {:>10} {:>16}\n", r.table,
                       r.data_type, r.rounding, r.state, r.hash_size > 0 ? std::to_string(r.hash_size) : std::string("-"),
                       r.low_rank_dim > 0 ? std::to_string(r.low_rank_dim) : std::string("-"), ss::format_bytes(r.weight_bytes),
                       ss::format_bytes(r.optimizer_state_bytes), ss::format_bytes(r.master_copy_bytes),
                       or_dash(r.max_abs_error, "{:.3g}"), or_dash(r.relative_error, "{:.3g}"),
                       or_dash(r.collisions_per_step, "{:.1f}"));
  // which ranks' batches collide (hashed tables, sessions that hold them per rank)
  if (const auto per_rank = ss::rank_hash_collisions(meta); per_rank && !per_rank->empty()) {
    out += "hash collisions per measured step, by the rank whose batches collided:";
    for (size_t r = 0; r < per_rank->size(); ++r)
      out += fmt::format("  rank {} {:.1f}", r, static_cast<double>((*per_rank)[r]) / static_cast<double>(steps > 0 ? steps : 1));
    out += "\n";
  }
  return out;
}

}  // namespace embedscope::cli
