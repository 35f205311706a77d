#include "embedscope/engine/memory/snapshot_replay.h"

#include <algorithm>
#include <climits>

#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"

namespace embedscope::engine {

namespace ts = sessions::torch_snapshot;

std::vector<MemoryAction> snapshot_actions(const ts::MemorySnapshotFile& snap, int64_t device) {
  std::vector<MemoryAction> out;
  if (device < 0 || device >= static_cast<int64_t>(snap.device_traces.size())) return out;
  const auto& trace = snap.device_traces[static_cast<size_t>(device)];
  out.reserve(trace.size());
  bool releasing = false;
  for (size_t i = 0; i < trace.size(); ++i) {
    const ts::TraceEntry& e = trace[i];
    MemoryAction a;
    a.id = static_cast<int64_t>(e.addr);
    a.stream = e.stream;
    a.entry = static_cast<int64_t>(i);
    const bool release = e.action == ts::TraceAction::segment_free || e.action == ts::TraceAction::segment_unmap;
    if (release && releasing) continue;  // one empty_cache per run of releases
    releasing = release;
    switch (e.action) {
      case ts::TraceAction::alloc:
        if (e.size <= 0) continue;
        a.kind = MemoryAction::Kind::alloc;
        a.size = e.size;
        {
          const auto& frames = snap.stacks.at(static_cast<size_t>(e.stack));
          if (!frames.empty()) a.tag = snap.frames[static_cast<size_t>(frames[0])].name;
        }
        break;
      case ts::TraceAction::free_requested: a.kind = MemoryAction::Kind::free_requested; break;
      case ts::TraceAction::free_completed: a.kind = MemoryAction::Kind::free_completed; break;
      case ts::TraceAction::segment_free:
      case ts::TraceAction::segment_unmap: a.kind = MemoryAction::Kind::empty_cache; break;
      case ts::TraceAction::oom: {  // the request that failed: would this setting have served it?
        if (e.size <= 0) continue;
        a.kind = MemoryAction::Kind::alloc;
        a.id = INT64_MIN + static_cast<int64_t>(i);  // no block address: the request never got memory
        a.size = e.size;
        a.tag = "the request that ran out of memory";
        out.push_back(a);
        a.kind = MemoryAction::Kind::free_completed;  // it never existed in the recorded run
        a.size = 0;
        break;
      }
      default: continue;
    }
    out.push_back(std::move(a));
  }
  return out;
}

AllocatorConfig recorded_config(const ts::MemorySnapshotFile& snap, int64_t capacity) {
  AllocatorConfig c;
  c.kind = snap.settings.expandable_segments ? AllocatorKind::expandable : AllocatorKind::caching;
  c.capacity_bytes = capacity;
  c.max_split_size = snap.settings.max_split_size;
  c.back_with_memory = false;
  return c;
}

int64_t snapshot_capacity(const ts::MemorySnapshotFile& snap, int64_t device) {
  if (device < 0 || device >= static_cast<int64_t>(snap.device_traces.size())) return 0;
  const auto& trace = snap.device_traces[static_cast<size_t>(device)];
  for (size_t i = 0; i < trace.size(); ++i)
    if (trace[i].action == ts::TraceAction::oom) {
      const ts::TimelineWalk w = ts::walk_timeline(snap, device, 0);
      const int64_t reserved = i < w.points.size() ? w.points[i].reserved : 0;
      return static_cast<int64_t>(trace[i].addr) + reserved;
    }
  return 0;
}

SnapshotReplay replay_snapshot(const ts::MemorySnapshotFile& snap, int64_t device,
                               const std::vector<AllocatorConfig>& settings, const std::string& origin) {
  SnapshotReplay out;
  out.device = device;
  if (device < static_cast<int64_t>(snap.device_traces.size())) {
    const auto& trace = snap.device_traces[static_cast<size_t>(device)];
    out.entries = static_cast<int64_t>(trace.size());
    for (size_t i = 0; i < trace.size(); ++i)
      if (trace[i].action == ts::TraceAction::oom) out.recorded_ooms.push_back(static_cast<int64_t>(i));
  }
  for (const auto& s : snap.segments)
    if (s.device == device) {
      ++out.snapshot_segments;
      out.snapshot_reserved += s.total_size;
    }
  const ts::TimelineWalk walk = ts::walk_timeline(snap, device, 0);
  out.starts_at_process_start = walk.starts_empty;
  out.initial_blocks = walk.initial_blocks;
  std::vector<InitialBlock> initial;
  for (const auto& b : walk.initial_live)
    initial.push_back({static_cast<int64_t>(b.address), b.size, b.stream, b.pending});
  const std::vector<MemoryAction> actions = snapshot_actions(snap, device);
  for (const auto& c : settings) {
    out.capacity_bytes = c.capacity_bytes;
    out.results.push_back(replay_actions(actions, initial, c, origin, true));
  }
  return out;
}

std::vector<MemoryAction> history_actions(const sessions::MemoryHistory& h) {
  using K = sessions::MemoryEntryKind;
  std::vector<MemoryAction> out;
  out.reserve(static_cast<size_t>(h.size()));
  bool releasing = false;
  for (int64_t i = 0; i < h.size(); ++i) {
    const sessions::MemoryEntry& e = h.entries()[static_cast<size_t>(i)];
    MemoryAction a;
    a.id = static_cast<int64_t>(e.address);
    a.stream = e.stream;
    a.entry = i;
    const bool release = e.kind == K::segment_free || e.kind == K::segment_shrink;
    if (release && releasing) continue;  // one empty_cache per run of releases
    releasing = release;
    switch (e.kind) {
      case K::alloc: {
        const sessions::MemoryAllocation& al = h.allocations()[static_cast<size_t>(e.allocation)];
        a.kind = MemoryAction::Kind::alloc;
        a.size = std::max<int64_t>(1, al.requested);
        a.tag = al.tag;
        break;
      }
      case K::free_requested: a.kind = MemoryAction::Kind::free_requested; break;
      case K::free_completed: a.kind = MemoryAction::Kind::free_completed; break;
      case K::segment_free:
      case K::segment_shrink: a.kind = MemoryAction::Kind::empty_cache; break;
      case K::oom: {
        const int64_t asked = e.requested > 0 ? e.requested : e.size;
        if (asked <= 0) continue;
        a.kind = MemoryAction::Kind::alloc;
        a.id = INT64_MIN + i;  // the request never got memory
        a.size = asked;
        a.tag = "the request that ran out of memory";
        out.push_back(a);
        a.kind = MemoryAction::Kind::free_completed;
        a.size = 0;
        break;
      }
      default: continue;
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<InitialBlock> history_initial_blocks(const sessions::MemoryHistory& h) {
  std::vector<InitialBlock> out;
  for (const auto& [addr, a] : h.initial().blocks) {
    const sessions::MemoryAllocation& al = h.allocations()[static_cast<size_t>(a)];
    out.push_back({static_cast<int64_t>(addr), al.size, al.stream, al.pending_at_start});
  }
  return out;
}

int64_t history_capacity(const sessions::MemoryHistory& h) {
  for (int64_t i = 0; i < h.size(); ++i) {
    const sessions::MemoryEntry& e = h.entries()[static_cast<size_t>(i)];
    if (e.kind == sessions::MemoryEntryKind::oom && e.address > 0) return static_cast<int64_t>(e.address) + h.reserved_after(i);
  }
  return 0;
}

std::vector<ReplayResult> replay_history(const sessions::MemoryHistory& h, const std::vector<AllocatorConfig>& settings,
                                         const std::string& origin) {
  const auto actions = history_actions(h);
  const auto initial = history_initial_blocks(h);
  std::vector<ReplayResult> out;
  for (const auto& c : settings) out.push_back(replay_actions(actions, initial, c, origin, true));
  return out;
}

}  // namespace embedscope::engine
