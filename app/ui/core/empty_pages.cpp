#include "core/empty_pages.h"

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::ui {

namespace {
bool imported(const sessions::SessionReader& s) { return s.meta(sessions::meta::kImported) == "1"; }
std::string format_of(const sessions::SessionReader& s) { return s.meta(sessions::meta::kImportFormat, "profiler"); }
}  // namespace

std::string load_page_empty_reason(const sessions::SessionReader& s) {
  if (!imported(s) || !s.load().empty()) return "";
  const std::string format = format_of(s);
  const std::string what = format == "torch_memory_snapshot"
                               ? "an imported PyTorch memory snapshot records the caching allocator's history (the "
                                 "Memory page)"
                               : fmt::format("an imported {} trace records kernels, copies and collectives", format);
  return fmt::format(
      "No load counters: {}, not the ids each rank looked up in each table shard. The load heatmaps, the imbalance "
      "per step and the hot rows come from Embedscope's own runs and simulations of a workload (File > New Workload).",
      what);
}

std::string memory_page_empty_reason(const sessions::SessionReader& s) {
  if (!imported(s)) return "";
  if (!s.memory_counters().empty() || !s.memory_events().empty() || !s.memory_snapshots().empty() ||
      !s.memory_timeline().empty())
    return "";
  return fmt::format(
      "No allocator history: this imported {} trace holds no allocations (its [memory] instant events, if the "
      "profiler recorded any, are not imported). The allocator's history, fragmentation and blocks come from a "
      "PyTorch memory snapshot (torch.cuda.memory._snapshot() pickle: File > Open) or from Embedscope's own runs.",
      format_of(s));
}

std::string timeline_page_empty_reason(const sessions::SessionReader& s) {
  if (!imported(s) || format_of(s) != "torch_memory_snapshot" || !s.lanes().empty()) return "";
  return "No ops: a PyTorch memory snapshot records the caching allocator's history (allocations, frees, segments), "
         "not ops or kernels. Its trace over time, fragmentation, segments and blocks are on the Memory page; the "
         "ops of the same job come from a PyTorch profiler trace (File > Open a .json trace).";
}

}  // namespace embedscope::ui
