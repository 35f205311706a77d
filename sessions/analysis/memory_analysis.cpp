// Peaks, OOMs, rounding, top stacks and the active memory timeline of a memory history
// (memory_analysis.h).

#include "embedscope/sessions/analysis/memory_analysis.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

std::vector<std::string> stack_frames(int32_t stack_id, const std::vector<MemoryFrame>& frames,
                                      const std::vector<MemoryStackFrame>& stacks) {
  std::vector<std::pair<int32_t, int32_t>> depth_frame;
  for (const auto& s : stacks)
    if (s.stack_id == stack_id) depth_frame.emplace_back(s.depth, s.frame_id);
  std::sort(depth_frame.begin(), depth_frame.end());
  std::vector<std::string> out;
  for (const auto& [d, f] : depth_frame) {
    // frames are written with ids 0..n-1 in order; look up by id when they are not
    const MemoryFrame* fr = f >= 0 && static_cast<size_t>(f) < frames.size() && frames[static_cast<size_t>(f)].id == f
                                ? &frames[static_cast<size_t>(f)]
                                : nullptr;
    if (!fr)
      for (const auto& x : frames)
        if (x.id == f) fr = &x;
    out.push_back(fr ? fmt::format("{} ({}:{})", fr->name, fr->filename, fr->line) : fmt::format("frame {}", f));
  }
  return out;
}

std::vector<MemoryStackHeld> top_stacks(const MemoryHistory& h, const MemoryState& st, size_t top,
                                        const std::vector<MemoryFrame>& frames,
                                        const std::vector<MemoryStackFrame>& stacks) {
  std::map<std::pair<int32_t, std::string>, MemoryStackHeld> by;
  for (const auto& [addr, a] : st.blocks) {
    const MemoryAllocation& al = h.allocations()[static_cast<size_t>(a)];
    const auto key = al.stack_id > 0 ? std::pair<int32_t, std::string>{al.stack_id, ""} : std::pair{0, al.tag};
    MemoryStackHeld& s = by[key];
    s.stack_id = al.stack_id;
    s.bytes += al.size;
    s.requested += al.requested;
    ++s.blocks;
    if (s.name.empty()) {
      if (al.stack_id > 0) {
        const auto f = stack_frames(al.stack_id, frames, stacks);
        s.name = f.empty() ? fmt::format("stack {}", al.stack_id) : f.front();
      } else {
        s.name = al.tag.empty() ? "(no stack)" : al.tag;
      }
    }
  }
  std::vector<MemoryStackHeld> out;
  for (auto& [k, v] : by) out.push_back(std::move(v));
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  if (out.size() > top) out.resize(top);
  return out;
}

RankMemoryAnalysis analyze_memory_history(const MemoryHistory& h, int32_t rank, size_t top,
                                          const std::vector<MemoryFrame>& frames,
                                          const std::vector<MemoryStackFrame>& stacks) {
  RankMemoryAnalysis r;
  r.rank = rank;
  r.entries = h.size();
  r.starts_empty = h.starts_empty();
  r.problems = static_cast<int64_t>(h.problems().size());
  for (int64_t i = 0; i < h.size(); ++i) {
    if (r.peak_entry < 0 || h.allocated_after(i) > r.peak_allocated) {
      r.peak_entry = i;
      r.peak_allocated = h.allocated_after(i);
    }
    r.peak_reserved = std::max(r.peak_reserved, h.reserved_after(i));
    r.peak_active = std::max(r.peak_active, h.active_after(i));
  }
  if (r.peak_entry >= 0) {
    const MemoryState st = h.state_at(r.peak_entry);
    r.at_peak = h.figures(st);
    // never negative: a request above its block is contradicting input (the importer records
    // trace_size_disagrees_with_dump and stores the block's size as the request)
    r.rounding_loss_at_peak = std::max<int64_t>(0, st.allocated - st.requested);
    r.reserved_overhead_at_peak = std::max<int64_t>(0, st.reserved - st.requested);
    r.largest_free_block_max = r.at_peak.largest_free_block;
    r.top_stacks_at_peak = top_stacks(h, st, top, frames, stacks);
    for (int64_t i = 0; i < h.size() && r.peak_reserved_entry < 0; ++i)
      if (h.reserved_after(i) == r.peak_reserved) r.peak_reserved_entry = i;
    // a segment is reserved for the alloc that follows it (replay-memory, which replays allocs
    // only, sees both as one action): the moment is after that alloc
    const auto& es = h.entries();
    while (r.peak_reserved_entry >= 0 && r.peak_reserved_entry + 1 < h.size() &&
           (es[r.peak_reserved_entry].kind == MemoryEntryKind::segment_alloc ||
            es[r.peak_reserved_entry].kind == MemoryEntryKind::segment_grow) &&
           h.reserved_after(r.peak_reserved_entry + 1) == r.peak_reserved)
      ++r.peak_reserved_entry;
    if (r.peak_reserved_entry >= 0) r.at_peak_reserved = h.figures(h.state_at(r.peak_reserved_entry));
  }
  // the OOMs: walk forward once, taking the layout at each
  MemoryState st = h.initial();
  for (int64_t i = 0; i < h.size(); ++i) {
    h.step(st);
    const MemoryEntry& e = h.entries()[static_cast<size_t>(i)];
    if (e.kind != MemoryEntryKind::oom) continue;
    MemoryOom o;
    o.entry = i;
    o.time_ns = e.time_ns;
    o.requested = e.requested > 0 ? e.requested : e.size;
    o.device_free = e.address > 0 ? static_cast<int64_t>(e.address) : -1;
    const MemoryStateFigures f = h.figures(st);
    o.largest_free_block = f.largest_free_block;
    o.free_in_segments = f.free_in_segments;
    o.allocated = f.allocated;
    o.reserved = f.reserved;
    o.small_pool = (o.requested + 511) / 512 * 512 <= kSmallPoolRequest;
    o.largest_free_in_pool = o.small_pool ? f.largest_free_small_pool : f.largest_free_large_pool;
    o.fragmentation = f.free_in_segments + std::max<int64_t>(0, o.device_free) >= o.requested &&
                      o.largest_free_in_pool < o.requested;
    o.top_stacks = top_stacks(h, st, top, frames, stacks);
    r.largest_free_block_max = std::max(r.largest_free_block_max, o.largest_free_block);
    r.ooms.push_back(std::move(o));
  }
  return r;
}

std::vector<RankMemoryAnalysis> analyze_memory(const SessionReader& session, size_t top) {
  const auto frames = session.memory_frames();
  const auto stacks = session.memory_stacks();
  std::vector<RankMemoryAnalysis> out;
  for (int32_t rank : MemoryHistory::ranks_with_history(session))
    out.push_back(analyze_memory_history(MemoryHistory::load(session, rank), rank, top, frames, stacks));
  return out;
}

std::string recorded_oom_text(const SessionReader& session, const std::vector<RankMemoryAnalysis>& memory) {
  if (session.meta(meta::kImported) != "1") return "";
  std::string ranks;
  for (const auto& m : memory)
    if (!m.ooms.empty())
      ranks += fmt::format("{}rank {} at entry {} of {}", ranks.empty() ? "" : ", ", m.rank, m.ooms.front().entry, m.entries);
  return ranks.empty() ? ranks : "the recorded program ran out of memory: " + ranks;
}

std::string recorded_oom_text(const SessionReader& session) {
  if (session.meta(meta::kImported) != "1" || session.meta(meta::kImportFormat) != "torch_memory_snapshot") return "";
  return recorded_oom_text(session, analyze_memory(session));
}

std::vector<TimelineColumn> active_timeline(const MemoryHistory& h, int64_t columns) {
  std::vector<TimelineColumn> out;
  const int64_t n = h.size();
  if (n == 0 || columns <= 0) return out;
  columns = std::min(columns, n);
  out.resize(static_cast<size_t>(columns));
  for (int64_t c = 0; c < columns; ++c) {
    TimelineColumn& col = out[static_cast<size_t>(c)];
    col.first_entry = c * n / columns;
    col.last_entry = (c + 1) * n / columns - 1;
    col.entry = col.first_entry;
    for (int64_t i = col.first_entry; i <= col.last_entry; ++i)
      if (h.active_after(i) > h.active_after(col.entry)) col.entry = i;
  }
  // one forward walk; live blocks kept in allocation order (an allocation's index is its order)
  MemoryState st = h.initial();
  std::set<int32_t> live;
  for (const auto& [addr, a] : st.blocks) live.insert(a);
  size_t next = 0;
  for (int64_t i = 0; i < n && next < out.size(); ++i) {
    h.step(st);
    const MemoryEntry& e = h.entries()[static_cast<size_t>(i)];
    if (e.kind == MemoryEntryKind::alloc) live.insert(e.allocation);
    if (e.kind == MemoryEntryKind::free_completed) live.erase(e.allocation);
    while (next < out.size() && out[next].entry == i) {
      TimelineColumn& col = out[next++];
      int64_t offset = 0;
      col.bands.reserve(live.size());
      for (int32_t a : live) {
        col.bands.push_back({a, offset});
        offset += h.allocations()[static_cast<size_t>(a)].size;
      }
      col.active = offset;
      col.reserved = st.reserved;
      col.figures = h.figures(st);
    }
  }
  return out;
}

int32_t band_at(const MemoryHistory& h, const TimelineColumn& column, int64_t bytes) {
  const auto& b = column.bands;
  auto it = std::upper_bound(b.begin(), b.end(), bytes, [](int64_t v, const TimelineColumn::Band& x) { return v < x.offset; });
  if (it == b.begin()) return -1;
  --it;
  return bytes < it->offset + h.allocations()[static_cast<size_t>(it->allocation)].size ? it->allocation : -1;
}

AllocatorSettings allocator_settings(const SessionReader& session) {
  AllocatorSettings out;
  auto add = [&](const nlohmann::json& o) {
    for (auto it = o.begin(); it != o.end(); ++it)
      out.entries.emplace_back(it.key(), it->is_string() ? it->get<std::string>() : it->dump());
  };
  const auto settings = nlohmann::json::parse(session.meta(meta::kAllocatorSettingsJson, "{}"), nullptr, false);
  if (settings.is_object() && !settings.empty()) {
    add(settings);
    const int64_t split = settings.value("max_split_size", int64_t{0});
    const std::string split_text = split > 0 ? ", max_split_size " + format_bytes(split) : std::string();
    if (session.meta(meta::kImported, "0") == "1") {
      out.source = "PyTorch";
      const bool expandable = settings.value("expandable_segments", false);
      out.recorded = std::string(expandable ? "expandable_segments" : "caching") + split_text;
      if (const auto gc = settings.find("garbage_collection_threshold");
          !expandable && gc != settings.end() && gc->is_number() && gc->get<double>() > 0)
        out.recorded += fmt::format(", garbage_collection_threshold {:g}", gc->get<double>());
    } else {  // an lm_embedding run (tester47 F14.6: its Memory page said "not recorded")
      out.source = "the run's engine";
      out.recorded = settings.value("allocator", std::string("caching")) + split_text;
    }
    return out;
  }
  const auto w = nlohmann::json::parse(session.meta(meta::kWorkloadJson, "{}"), nullptr, false);
  if (w.is_object() && w.contains("memory") && w["memory"].is_object()) {
    add(w["memory"]);
    out.source = "the run's workload";
    out.recorded = w["memory"].value("allocator", std::string("caching"));
    if (const auto gc = w["memory"].find("garbage_collection_threshold");
        out.recorded == "caching" && gc != w["memory"].end() && gc->is_number() && gc->get<double>() > 0)
      out.recorded += fmt::format(", garbage_collection_threshold {:g}", gc->get<double>());  // the replay's label
  }
  return out;
}

}  // namespace embedscope::sessions
