#include "embedscope/engine/memory/snapshot_replay.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>

#include <fmt/format.h>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"

namespace embedscope::engine {

namespace ts = sessions::torch_snapshot;

std::vector<MemoryAction> snapshot_actions(const ts::MemorySnapshotFile& snap, int64_t device) {
  return snapshot_actions(snap, device, ts::walk_timeline(snap, device, 0));
}

int64_t replayable_request(int64_t bytes) { return std::min(bytes, kMaxMemoryBytes + kMinBlockSize); }

std::vector<MemoryAction> snapshot_actions(const ts::MemorySnapshotFile& snap, int64_t device, const ts::TimelineWalk& walk) {
  std::vector<MemoryAction> out;
  if (device < 0 || device >= static_cast<int64_t>(snap.device_traces.size())) return out;
  const auto& trace = snap.device_traces[static_cast<size_t>(device)];
  out.reserve(trace.size());
  bool releasing = false;
  // With a recorded garbage_collection_threshold, a run of segment_free entries right before a
  // segment_alloc is malloc collecting (garbage_collect_cached_blocks, then alloc_block), which the
  // allocator model does itself under that setting: no empty_cache of the program's (the other
  // settings' rows must not release the cache there either).
  const double gc = snap.settings.garbage_collection_threshold;
  const bool collects = gc > 0 && gc < 1 && !snap.settings.expandable_segments;
  const auto has_frames = [&](int32_t stack) {
    return stack >= 0 && static_cast<size_t>(stack) < snap.stacks.size() && !snap.stacks[static_cast<size_t>(stack)].empty();
  };
  for (size_t i = 0; i < trace.size(); ++i) {
    const ts::TraceEntry& e = trace[i];
    MemoryAction a;
    a.id = static_cast<int64_t>(e.addr);
    a.stream = e.stream;
    a.entry = static_cast<int64_t>(i);
    const bool release = e.action == ts::TraceAction::segment_free || e.action == ts::TraceAction::segment_unmap;
    if (release && releasing) continue;  // one empty_cache per run of releases
    if (release) {
      size_t j = i;
      bool same_stack = true;
      while (j < trace.size() && (trace[j].action == ts::TraceAction::segment_free ||
                                  trace[j].action == ts::TraceAction::segment_unmap)) {
        same_stack = same_stack && trace[j].stack == e.stack;
        ++j;
      }
      const bool grows = j < trace.size() && (trace[j].action == ts::TraceAction::segment_alloc ||
                                              trace[j].action == ts::TraceAction::segment_map);
      // the allocator's own release inside one malloc: PyTorch records it with that malloc's context,
      // the stack of the segment_alloc / segment_map that follows (release_available_cached_blocks
      // and release_cached_blocks, or unmap_block, then alloc_block / map_block: one `context`)
      const bool own_release = grows && same_stack && trace[j].stack == e.stack && has_frames(e.stack);
      const bool collection = grows && collects && trace[j].action == ts::TraceAction::segment_alloc &&
                              std::all_of(trace.begin() + static_cast<std::ptrdiff_t>(i),
                                          trace.begin() + static_cast<std::ptrdiff_t>(j),
                                          [](const ts::TraceEntry& x) { return x.action == ts::TraceAction::segment_free; });
      if (own_release || collection) {
        i = j - 1;  // the allocator's releases: the model's own when it runs out of room (or collects)
        releasing = false;
        continue;
      }
    }
    releasing = release;
    switch (e.action) {
      case ts::TraceAction::alloc:
        if (e.size <= 0) continue;
        a.kind = MemoryAction::Kind::alloc;
        a.size = e.size;
        // a request larger than its block: the block's size, as the import stores it (snap54)
        if (auto o = walk.oversized.find(i); o != walk.oversized.end()) a.size = o->second;
        {
          const auto& frames = snap.stacks.at(static_cast<size_t>(e.stack));
          if (!frames.empty()) a.tag = snap.frames[static_cast<size_t>(frames[0])].name;
        }
        break;
      case ts::TraceAction::free_requested: a.kind = MemoryAction::Kind::free_requested; break;
      case ts::TraceAction::free_completed:
        a.kind = MemoryAction::Kind::free_completed;
        // at no block's address: the block whose free it completes, as the import frees it
        if (auto m = walk.misaddressed.find(i); m != walk.misaddressed.end()) a.id = static_cast<int64_t>(m->second);
        break;
      case ts::TraceAction::segment_free:
      case ts::TraceAction::segment_unmap: a.kind = MemoryAction::Kind::empty_cache; break;
      case ts::TraceAction::oom: {  // the request that failed: would this setting have served it?
        if (e.size <= 0) continue;
        a.kind = MemoryAction::Kind::alloc;
        a.id = INT64_MIN + static_cast<int64_t>(i);  // no block address: the request never got memory
        a.size = replayable_request(e.size);
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

std::vector<int64_t> recorded_roundup_divisions(const ts::AllocatorSettings& s) {
  // PyTorch's memory snapshot writes a dict keyed by each interval's start in MiB ("1", "2", "4",
  // ... "32768"); a list (older writers) is indexed by interval, from "0"
  const bool listed = std::any_of(s.roundup_power2_divisions.begin(), s.roundup_power2_divisions.end(),
                                  [](const auto& kv) { return kv.first == "0"; });
  std::vector<int64_t> out;
  for (const auto& [key, divisions] : s.roundup_power2_divisions) {
    uint64_t k = 0;
    try {
      k = std::stoull(key);
    } catch (const std::exception&) {
      continue;  // not an interval
    }
    if (!listed && !std::has_single_bit(k)) continue;
    const size_t index = listed ? static_cast<size_t>(k) : static_cast<size_t>(std::countr_zero(k));
    if (index >= 16) continue;  // PyTorch's kRoundUpPowerOfTwoIntervals
    if (out.size() <= index) out.resize(index + 1, 0);
    out[index] = divisions;
  }
  if (std::none_of(out.begin(), out.end(), [](int64_t d) { return d > 1; })) return {};
  out.resize(16, 0);
  return out;
}

AllocatorConfig recorded_config(const ts::MemorySnapshotFile& snap, int64_t capacity) {
  AllocatorConfig c;
  c.kind = snap.settings.expandable_segments ? AllocatorKind::expandable : AllocatorKind::caching;
  c.capacity_bytes = capacity;
  c.max_split_size = snap.settings.max_split_size;
  c.back_with_memory = false;
  // PyTorch takes 0 < t < 1 only (its parser refuses the rest), and collects with the caching
  // allocator's segments: an expandable range never has a whole free segment to release
  const double gc = snap.settings.garbage_collection_threshold;
  if (gc > 0 && gc < 1 && c.kind == AllocatorKind::caching) c.garbage_collection_threshold = gc;
  c.roundup_power2_divisions = recorded_roundup_divisions(snap.settings);
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
  out.problems = walk.problems;
  out.initial_blocks = walk.initial_blocks;
  std::vector<InitialBlock> initial;
  for (const auto& b : walk.initial_live)
    initial.push_back({static_cast<int64_t>(b.address), b.size, b.stream, b.pending});
  const std::vector<MemoryAction> actions = snapshot_actions(snap, device, walk);
  // errors name the file and the device (replay_actions adds the entry)
  const std::string where = fmt::format("{}: device {}", origin, device);
  for (const auto& c : settings) {
    out.capacity_bytes = c.capacity_bytes;
    out.results.push_back(replay_actions(actions, initial, c, where, true));
  }
  return out;
}

ReplayVerdict recorded_replay_verdict(const ReplayResult& own, const std::string& label, const RecordedMemory& rec) {
  ReplayVerdict v;
  std::vector<std::string> same;
  const auto pct = [](double f) { return fmt::format("{:.1f}%", 100 * f); };
  bool oom_said = false;
  // the recorded OOM's request served: the replay's higher peak is that request's, said with it
  const bool served_higher = rec.first_oom_entry >= 0 && !own.oom && rec.peak_reserved >= 0 &&
                             own.peak_reserved > rec.peak_reserved;
  if (rec.peak_reserved >= 0 && !served_higher) {
    if (own.oom && own.peak_reserved < rec.peak_reserved) {
      v.differences.push_back(fmt::format("the replay ran out of memory at entry {}, before it reached the recorded peak "
                                          "(the capacity offered, {}, is below what the recording reserved, {})",
                                          own.oom_action, format_bytes(own.config.capacity_bytes),
                                          format_bytes(rec.peak_reserved)));
      oom_said = true;
    } else if (own.peak_reserved != rec.peak_reserved && rec.capacity_assumed &&
               own.config.garbage_collection_threshold > 0) {
      // tester63c F6: the threshold is a fraction of the device's memory, which was not recorded
      v.differences.push_back(fmt::format(
          "the replay reserved a different peak ({} vs {}): the recorded garbage_collection_threshold {:g} collects "
          "once reserved bytes pass {:g} x the device's capacity, which the snapshot does not record (no OOM): the "
          "replay assumed {} (the recorded peak reserved); give the device's memory as the capacity",
          format_bytes(own.peak_reserved), format_bytes(rec.peak_reserved), own.config.garbage_collection_threshold,
          own.config.garbage_collection_threshold, format_bytes(own.config.capacity_bytes)));
    } else if (own.peak_reserved != rec.peak_reserved) {
      v.differences.push_back(fmt::format("the replay reserved a different peak ({} vs {}): the replay's allocator model "
                                          "(PyTorch's rounding and segment rules) placed the blocks differently from the "
                                          "recorded allocator, so its peak is another moment and another layout",
                                          format_bytes(own.peak_reserved), format_bytes(rec.peak_reserved)));
    } else {
      same.push_back("peak reserved " + format_bytes(rec.peak_reserved));
      if (rec.fragmentation_at_peak_reserved >= 0) {
        if (std::abs(own.fragmentation_at_peak - rec.fragmentation_at_peak_reserved) < 0.0005)
          same.push_back(pct(rec.fragmentation_at_peak_reserved) + " at peak reserved");
        else
          v.differences.push_back(fmt::format(
              "it gives {} at peak reserved, the recording {}: the same peak, reached with blocks placed differently: "
              "the replay's allocator model (PyTorch's rounding, best fit and splitting rules) chose other free blocks "
              "than the recorded allocator did, so the free bytes lie in other gaps",
              pct(own.fragmentation_at_peak), pct(rec.fragmentation_at_peak_reserved)));
      }
    }
  }
  if (!oom_said) {
    if (rec.first_oom_entry >= 0 && !own.oom)
      v.differences.push_back(fmt::format("the recorded OOM (entry {}) did not recur: at the capacity offered, {}, the "
                                          "replay served that request{}",
                                          rec.first_oom_entry, format_bytes(own.config.capacity_bytes),
                                          served_higher ? fmt::format(", reserving up to {} (the recording {})",
                                                                      format_bytes(own.peak_reserved),
                                                                      format_bytes(rec.peak_reserved))
                                                        : std::string()));
    else if (own.oom && rec.first_oom_entry < 0)
      v.differences.push_back(fmt::format("the replay ran out of memory at entry {}, where the recorded run did not",
                                          own.oom_action));
    else if (own.oom && own.oom_action != rec.first_oom_entry)
      v.differences.push_back(fmt::format("the replay ran out of memory at entry {}, the recorded run at entry {}",
                                          own.oom_action, rec.first_oom_entry));
    else if (own.oom)
      same.push_back(fmt::format("the OOM at entry {}", rec.first_oom_entry));
  }
  // the end against the dump (not after an OOM the recording did not have: the replay stopped there)
  if (rec.dump_segments >= 0 && (!own.oom || own.oom_action == rec.first_oom_entry)) {
    if (own.final_segments == rec.dump_segments && own.final_reserved == rec.dump_reserved)
      same.push_back(fmt::format("the dump's {} segment{} ({} reserved)", rec.dump_segments,
                                 rec.dump_segments == 1 ? "" : "s", format_bytes(rec.dump_reserved)));
    else
      v.differences.push_back(fmt::format("the replay ends with {} segment{}, {} reserved; the dump has {} segment{}, {} "
                                          "reserved",
                                          own.final_segments, own.final_segments == 1 ? "" : "s",
                                          format_bytes(own.final_reserved), rec.dump_segments,
                                          rec.dump_segments == 1 ? "" : "s", format_bytes(rec.dump_reserved)));
  }
  if (same.empty() && v.differences.empty()) return v;  // nothing known to compare: nothing said
  v.reproduces = v.differences.empty();
  const auto join = [](const std::vector<std::string>& parts, const char* sep) {
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
    return out;
  };
  v.text = v.reproduces ? fmt::format("The replay of the recorded settings ({}) reproduces the recording: {}.", label,
                                      join(same, ", "))
                        : fmt::format("The replay of the recorded settings ({}) does not reproduce the recording: {}.",
                                      label, join(v.differences, "; "));
  return v;
}

std::vector<MemoryAction> history_actions(const sessions::MemoryHistory& h, double recorded_gc_threshold) {
  using K = sessions::MemoryEntryKind;
  std::vector<MemoryAction> out;
  out.reserve(static_cast<size_t>(h.size()));
  bool releasing = false;
  const bool collects = recorded_gc_threshold > 0 && recorded_gc_threshold < 1;  // as snapshot_actions
  const auto& entries = h.entries();
  for (int64_t i = 0; i < h.size(); ++i) {
    const sessions::MemoryEntry& e = entries[static_cast<size_t>(i)];
    MemoryAction a;
    a.id = static_cast<int64_t>(e.address);
    a.stream = e.stream;
    a.entry = i;
    const bool release = e.kind == K::segment_free || e.kind == K::segment_shrink;
    if (release && releasing) continue;  // one empty_cache per run of releases
    if (release) {  // as snapshot_actions: the allocator's own release inside one malloc, or its collection
      int64_t j = i;
      bool same_stack = true, frees_only = true;
      while (j < h.size() && (entries[static_cast<size_t>(j)].kind == K::segment_free ||
                              entries[static_cast<size_t>(j)].kind == K::segment_shrink)) {
        same_stack = same_stack && entries[static_cast<size_t>(j)].stack_id == e.stack_id;
        frees_only = frees_only && entries[static_cast<size_t>(j)].kind == K::segment_free;
        ++j;
      }
      const sessions::MemoryEntry* next = j < h.size() ? &entries[static_cast<size_t>(j)] : nullptr;
      // an imported segment_map is a segment_grow, and an engine run's new segment too: the
      // recorded action says which
      const bool grows = next && (next->kind == K::segment_alloc || next->action == "segment_map");
      const bool own_release = grows && same_stack && next->stack_id == e.stack_id && e.stack_id != 0;
      const bool collection = grows && collects && frees_only && next->kind == K::segment_alloc;
      if (own_release || collection) {
        i = j - 1;
        releasing = false;
        continue;
      }
    }
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
        a.size = replayable_request(asked);
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
                                         const std::string& origin, double recorded_gc_threshold) {
  const auto actions = history_actions(h, recorded_gc_threshold);
  const auto initial = history_initial_blocks(h);
  std::vector<ReplayResult> out;
  for (const auto& c : settings) out.push_back(replay_actions(actions, initial, c, origin, true));
  return out;
}

std::vector<AllocatorConfig> advice_candidates(const AllocatorConfig* recorded, int64_t capacity) {
  std::vector<AllocatorConfig> out;
  if (recorded) {
    out.push_back(*recorded);
    out.back().capacity_bytes = capacity;
  }
  for (const AllocatorKind k : {AllocatorKind::caching, AllocatorKind::expandable, AllocatorKind::direct})
    out.push_back({k, capacity, 0, false});
  return out;
}

void advise_snapshot_rows(std::vector<ReplayResult>& rows, const AllocatorConfig* recorded,
                          const std::function<ReplayResult(const AllocatorConfig&)>& replay_one, bool pytorch_program) {
  if (rows.empty()) return;
  if (pytorch_program)
    for (auto& r : rows)  // the allocator's "live data does not fit" advice names the workload's tables
      if (r.oom && r.oom_other_advice.rfind("the live data does not fit this device:", 0) == 0) {
        r.oom_other_advice = kPytorchLiveDataAdvice;
        r.oom_advice = r.oom_other_advice;
        r.oom_message = r.oom_explanation + " Advice: " + r.oom_advice + r.oom_note;
      }
  advise_from_replays(rows, "the device's trace", replay_one, nullptr,
                      advice_candidates(recorded, rows.front().config.capacity_bytes));
}

}  // namespace embedscope::engine
