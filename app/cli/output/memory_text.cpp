#include "output/memory_text.h"

#include <fmt/format.h>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::cli {

using sessions::format_bytes;
using nlohmann::json;

namespace {

json stacks_json(const std::vector<sessions::MemoryStackHeld>& s) {
  json a = json::array();
  for (const auto& h : s)
    a.push_back({{"stack_id", h.stack_id}, {"name", h.name}, {"bytes", h.bytes}, {"requested_bytes", h.requested},
                 {"blocks", h.blocks}});
  return a;
}

std::string stacks_text(const std::vector<sessions::MemoryStackHeld>& s, const char* indent) {
  std::string out;
  for (const auto& h : s)
    out += fmt::format("{}{:>12}  {:>5} block{}  {}\n", indent, format_bytes(h.bytes), h.blocks, h.blocks == 1 ? " " : "s", h.name);
  return out;
}

// Why the device's free bytes did not help (tester63c F9: "8.0 MiB free on the device" beside a
// 3 MiB request read as fragmentation, unexplained): a request no cached block serves needs a new
// segment of PyTorch's get_allocation_size - 2 MiB for up to 1 MiB, 20 MiB below 10 MiB (an
// expandable segment maps pages of the same sizes) - which the device's free bytes could not hold.
// "" where the device's free bytes are unknown, would hold it, or the size depends on the
// allocator (10 MiB and more: 2 MiB steps, expandable 20 MiB pages).
std::string new_segment_reason(const sessions::MemoryOom& o) {
  if (o.device_free < 0 || o.requested >= engine::kMinLargeAlloc) return "";
  const int64_t segment = engine::segment_size_for(engine::round_size(o.requested));
  if (o.device_free >= segment) return "";
  return fmt::format("; the {} free on the device cannot hold the new {} segment it needs (PyTorch reserves {} for a "
                     "request {}: get_allocation_size)",
                     format_bytes(o.device_free), format_bytes(segment), format_bytes(segment),
                     o.small_pool ? "of up to 1 MiB" : "of 1 to 10 MiB");
}
}  // namespace

std::string memory_text(const std::vector<sessions::RankMemoryAnalysis>& ranks) {
  if (ranks.empty()) return "";
  std::string out = "memory (replayed from the allocator events; the peak is the first entry of the most allocated bytes)\n";
  for (const auto& r : ranks) {
    out += fmt::format("rank {}: {} events{}\n", r.rank, r.entries,
                       r.starts_empty ? "" : " (the trace starts mid-way: the blocks before it are inferred from the dump)");
    if (r.peak_entry < 0) continue;
    const auto& p = r.at_peak;
    out += fmt::format("  peak allocated     {} at entry {} (reserved then {}; peak reserved {}; with pending frees {})\n",
                       format_bytes(r.peak_allocated), r.peak_entry, format_bytes(p.reserved),
                       format_bytes(r.peak_reserved), format_bytes(r.peak_active));
    out += fmt::format("  at peak allocated  fragmentation {:.1f}% (1 - largest free / free), memviz {:.3f}; largest free "
                       "block {} of {} free in segments\n",
                       100 * p.external_fragmentation, p.memviz_fragmentation, format_bytes(p.largest_free_block),
                       format_bytes(p.free_in_segments));
    if (r.peak_reserved_entry >= 0) {
      const auto& q = r.at_peak_reserved;
      out += fmt::format("  at peak reserved   fragmentation {:.1f}%, memviz {:.3f}; largest free block {} of {} free "
                         "(entry {}: reserved first at its peak, the moment replay-memory's table gives)\n",
                         100 * q.external_fragmentation, q.memviz_fragmentation, format_bytes(q.largest_free_block),
                         format_bytes(q.free_in_segments), r.peak_reserved_entry);
    }
    out += fmt::format("  rounding           {} lost to rounding (allocated - requested); reserved - requested {}\n",
                       format_bytes(r.rounding_loss_at_peak), format_bytes(r.reserved_overhead_at_peak));
    if (!r.top_stacks_at_peak.empty()) out += "  held at the peak, by allocating stack\n" + stacks_text(r.top_stacks_at_peak, "    ");
    for (const auto& o : r.ooms) {
      out += fmt::format("  OOM at entry {}: asked {}; largest free block {} ({} free in segments{}); {}\n", o.entry,
                         format_bytes(o.requested), format_bytes(o.largest_free_block), format_bytes(o.free_in_segments),
                         o.device_free >= 0 ? ", " + format_bytes(o.device_free) + " free on the device" : std::string(),
                         !o.fragmentation ? std::string("capacity: not enough free bytes")
                         : (o.largest_free_in_pool == o.largest_free_block
                                ? std::string("fragmentation: enough bytes were free, but in no block large enough")
                                : fmt::format("fragmentation: enough bytes were free, but requests {} 1 MiB come from the "
                                              "{} pool, whose largest free block was {}",
                                              o.small_pool ? "up to" : "above", o.small_pool ? "small" : "large",
                                              format_bytes(o.largest_free_in_pool))) +
                               new_segment_reason(o));
      if (!o.top_stacks.empty()) out += "    held at the OOM\n" + stacks_text(o.top_stacks, "      ");
    }
    if (r.problems > 0)
      out += fmt::format("  {} events contradict the layout (the import problems name them)\n", r.problems);
  }
  return out;
}

json memory_json(const std::vector<sessions::RankMemoryAnalysis>& ranks) {
  json a = json::array();
  for (const auto& r : ranks) {
    json ooms = json::array();
    for (const auto& o : r.ooms)
      ooms.push_back({{"entry", o.entry}, {"time_ns", o.time_ns}, {"requested_bytes", o.requested},
                      {"device_free_bytes", o.device_free >= 0 ? json(o.device_free) : json(nullptr)},
                      {"largest_free_block_bytes", o.largest_free_block}, {"free_in_segments_bytes", o.free_in_segments},
                      {"pool", o.small_pool ? "small" : "large"}, {"largest_free_in_pool_bytes", o.largest_free_in_pool},
                      {"allocated_bytes", o.allocated}, {"reserved_bytes", o.reserved}, {"fragmentation", o.fragmentation},
                      {"top_stacks", stacks_json(o.top_stacks)}});
    const auto& p = r.at_peak;
    a.push_back({{"rank", r.rank}, {"entries", r.entries}, {"starts_at_process_start", r.starts_empty},
                 {"peak_entry", r.peak_entry}, {"peak_allocated_bytes", r.peak_allocated},
                 {"peak_reserved_bytes", r.peak_reserved}, {"peak_active_bytes", r.peak_active},
                 {"at_peak", {{"reserved_bytes", p.reserved}, {"requested_bytes", p.requested},
                              {"largest_free_block_bytes", p.largest_free_block},
                              {"free_in_segments_bytes", p.free_in_segments},
                              {"external_fragmentation", p.external_fragmentation},
                              {"memviz_fragmentation", p.memviz_fragmentation}}},
                 {"peak_reserved_entry", r.peak_reserved_entry},
                 {"at_peak_reserved", {{"allocated_bytes", r.at_peak_reserved.allocated},
                                       {"largest_free_block_bytes", r.at_peak_reserved.largest_free_block},
                                       {"free_in_segments_bytes", r.at_peak_reserved.free_in_segments},
                                       {"external_fragmentation", r.at_peak_reserved.external_fragmentation},
                                       {"memviz_fragmentation", r.at_peak_reserved.memviz_fragmentation}}},
                 {"rounding_loss_bytes", r.rounding_loss_at_peak},
                 {"reserved_minus_requested_bytes", r.reserved_overhead_at_peak},
                 {"top_stacks_at_peak", stacks_json(r.top_stacks_at_peak)}, {"ooms", ooms}, {"problems", r.problems}});
  }
  return a;
}

}  // namespace embedscope::cli
