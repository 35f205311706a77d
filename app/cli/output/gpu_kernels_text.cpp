#include "output/gpu_kernels_text.h"

#include <algorithm>

#include <fmt/format.h>

namespace embedscope::cli {

namespace {
// HTA's microseconds below 1 ms, milliseconds above (tester38 #9: "kernel time 879898.067 us"
// beside every other figure in ms); the precision stays HTA's whole microsecond or finer.
std::string us(int64_t ns) {
  if (ns >= 1'000'000 || ns <= -1'000'000) return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
  return ns % 1000 == 0 ? fmt::format("{} us", ns / 1000) : fmt::format("{:.3f} us", static_cast<double>(ns) / 1000.0);
}
}  // namespace

std::string gpu_kernels_text(const std::vector<sessions::RankKernelFigures>& figures, bool keep_last_step,
                             int64_t warmup_steps, const std::vector<sessions::RankKernelFigures>& on_export) {
  if (figures.empty()) return "";
  std::string s = fmt::format(
      "GPU kernels (Holistic Trace Analysis' definitions; {}{})\n"
      "  overlap      time computation kernels ran while communication kernels ran / communication kernel time\n"
      "               (merged intervals per class; memory and sync kernels in neither)\n"
      "  kernel time  first GPU kernel start to last kernel end; idle = kernel time - union of all kernels;\n"
      "               compute = union of computation kernels; non-compute = kernel time - compute - idle\n",
      keep_last_step                      ? "last profiler step kept"
      : figures.front().last_step_rule ? "last profiler step dropped, as HTA does"
                                       : "every GPU event counted: HTA drops the last profiler step only when there are two",
      figures.front().microsecond_rounding ? "; times rounded to whole us as HTA rounds them" : "");
  // tester42 F9: the column counted kernels, memcpy, memset and sync records under the name
  // "kernels" (12515 beside `events ... kernels 9876`); HTA's figures take every GPU event, so
  // the column is named as the workbench names it (models/gpu_kernels_model.cpp) and --json
  // (gpu_events), and says what it counts
  s += "  GPU events   kernels, memcpy, memset and sync records counted in the figures\n";
  // tester47 F6: the "last step" column also counted the GPU events with no launch (in no step,
  // left out by HTA's join whether the last step is kept or not): two columns, each what it says
  if (figures.front().last_step_rule) {
    if (keep_last_step)
      s += "  last step    GPU events launched after the last profiler step's end, left out as HTA leaves them out\n";
    else
      s += "  last step    GPU events of the last profiler step, left out as HTA leaves them out (not lost records)\n";
    s += "  no launch    GPU events with no launching host op (no runtime call with their correlation id): in no\n"
         "               profiler step, left out as HTA leaves them out, whether or not the last step is kept\n";
  }
  s += fmt::format("  {:<5} {:>10} {:>14} {:>14} {:>14} {:>14} {:>10} {:>9} {:>9}\n", "rank", "overlap", "kernel time", "idle",
                   "compute", "non-compute", "GPU events", "last step", "no launch");
  for (const auto& f : figures)
    s += fmt::format("  {:<5} {:>10} {:>14} {:>14} {:>14} {:>14} {:>10} {:>9} {:>9}\n", f.rank,
                     f.has_comm ? fmt::format("{:.2f}%", f.overlap_pct) : std::string("no comm"), us(f.kernel_time_ns),
                     us(f.idle_ns), us(f.compute_ns), us(f.non_compute_ns), f.gpu_events, f.dropped_last_step,
                     f.dropped_no_launch);
  int64_t warmup = 0;
  for (const auto& f : figures) warmup += f.warmup_events;
  if (warmup > 0)
    s += fmt::format("  (measured steps only: {} GPU event{} of set-up{} left out)\n", warmup, warmup == 1 ? "" : "s",
                     warmup_steps == 0  ? std::string(" (the run had no warm-up steps)")
                     : warmup_steps > 0 ? fmt::format(" and the {} warm-up step{}", warmup_steps, warmup_steps == 1 ? "" : "s")
                                        : std::string(" and the warm-up steps"));
  for (const auto& f : figures)
    if (!f.has_comm) {
      s += "  (no comm: the rank has no communication kernels, so it has no overlap figure)\n";
      break;
    }
  if (!on_export.empty()) {  // tester51 F11: what HTA makes of the export, beside the exact figure
    const auto pct = [](const sessions::RankKernelFigures& f) {
      return f.has_comm ? fmt::format("{:.2f}%", f.overlap_pct) : std::string("no comm");
    };
    bool same = true;
    for (const auto& f : on_export) same = same && pct(f) == pct(on_export.front());
    std::string per_rank;
    if (same && on_export.size() > 1) {
      per_rank = pct(on_export.front()) + " on every rank";
    } else {
      constexpr size_t kListed = 8;
      for (size_t i = 0; i < on_export.size() && i < kListed; ++i)
        per_rank += fmt::format("{}rank {} {}", i ? ", " : "", on_export[i].rank, pct(on_export[i]));
      if (on_export.size() > kListed) per_rank += fmt::format(", ... ({} ranks in --json)", on_export.size());
    }
    s += fmt::format("  (exact ns here; HTA reads this session's `export --format kineto`, which holds these GPU events,\n"
                     "   rounded to whole us, each start up and end down: overlap {})\n",
                     per_rank);
  }
  return s;
}

nlohmann::json gpu_kernels_json(const std::vector<sessions::RankKernelFigures>& figures, bool keep_last_step,
                                const std::vector<sessions::RankKernelFigures>& on_export) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& f : figures) {
    nlohmann::json hta_on_export;  // null: not asked (imported traces: HTA's rounding is in the figures already)
    for (const auto& e : on_export)
      if (e.rank == f.rank)
        hta_on_export = {{"overlap_pct", e.has_comm ? nlohmann::json(e.overlap_pct) : nlohmann::json(nullptr)},
                         {"gpu_events", e.gpu_events},
                         {"kernel_time_ns", e.kernel_time_ns}};
    ranks.push_back({{"rank", f.rank},
                     {"communication", f.has_comm},
                     {"overlap_pct", f.has_comm ? nlohmann::json(f.overlap_pct) : nlohmann::json(nullptr)},
                     {"comm_ns", f.comm_ns},
                     {"overlap_ns", f.overlap_ns},
                     {"kernel_time_ns", f.kernel_time_ns},
                     {"idle_ns", f.idle_ns},
                     {"compute_ns", f.compute_ns},
                     {"non_compute_ns", f.non_compute_ns},
                     {"gpu_events", f.gpu_events},
                     {"dropped_events", f.dropped_events},
                     {"dropped_last_step_events", f.dropped_last_step},
                     {"dropped_no_launch_events", f.dropped_no_launch},
                     {"warmup_events", f.warmup_events},
                     {"microsecond_rounding", f.microsecond_rounding},
                     {"hta_on_export", hta_on_export}});
  }
  return {{"definition", "Holistic Trace Analysis: comm/comp overlap and temporal breakdown of GPU kernels"},
          {"last_step", keep_last_step ? "kept" : "dropped"},
          {"ranks", ranks}};
}

std::string import_problems_text(const std::vector<sessions::ImportStat>& stats) {
  if (stats.empty()) return "  none\n";
  size_t width = 26;  // the name column: as wide as the longest name
  for (const auto& p : stats) width = std::max(width, p.name.size());
  std::string s = fmt::format("  {:<10} {:>9}  {:<{}} {}\n", "severity", "count", "problem", width, "first example");
  for (const auto& p : stats)
    s += fmt::format("  {:<10} {:>9}  {:<{}} {}{}\n", p.severity, p.count, p.name, width,
                     p.source.empty() ? "" : p.source + ": ", p.example);
  return s;
}

nlohmann::json import_problems_json(const std::vector<sessions::ImportStat>& stats) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : stats)
    a.push_back({{"name", p.name}, {"severity", p.severity}, {"count", p.count}, {"source", p.source},
                 {"byte_offset", p.byte_offset}, {"example", p.example}});
  return a;
}

std::string did_not_end_text(const std::vector<sessions::DidNotEndOp>& ops, size_t listed) {
  if (ops.empty()) return "";
  std::string s = fmt::format("did not end  {} event{}, kept as zero-length ops (no time counted; not in the time range)\n",
                              ops.size(), ops.size() == 1 ? "" : "s");
  for (size_t i = 0; i < ops.size() && i < listed; ++i)
    s += fmt::format("  rank {} lane {}  {}  at {}, step {}\n", ops[i].rank, ops[i].lane, ops[i].name, us(ops[i].start_ns),
                     ops[i].step);
  if (ops.size() > listed) s += fmt::format("  ... and {} more\n", ops.size() - listed);
  return s;
}

nlohmann::json did_not_end_json(const std::vector<sessions::DidNotEndOp>& ops, size_t listed) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < ops.size() && i < listed; ++i)
    a.push_back({{"rank", ops[i].rank}, {"lane", ops[i].lane}, {"start_ns", ops[i].start_ns}, {"step", ops[i].step},
                 {"name", ops[i].name}});
  return {{"count", ops.size()}, {"ops", std::move(a)}};
}

}  // namespace embedscope::cli
