#include "embedscope/engine/memory/replay.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/read_file.h"

namespace embedscope::engine {

MemoryTrace load_memory_trace(const std::string& path) {
  // "cannot open the allocator trace: No such file or directory" (or "Permission denied", ...):
  // the reason, not "cannot open" alone; a directory said as such (read_file.h)
  const std::string text = read_whole_file(path, "", "allocator trace");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw SpecError(fmt::format("{}: not a JSON trace: {}", path, e.what()));
  }
  auto fail = [&](const std::string& ptr, const std::string& why) { throw SpecError(fmt::format("{}: {}: {}", path, ptr, why)); };
  if (!j.is_object()) fail("/", "must be an object with \"actions\"");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "actions" && it.key() != "capacity_bytes") fail("/" + it.key(), "unknown key");
  MemoryTrace t;
  if (j.contains("capacity_bytes")) {
    if (!j["capacity_bytes"].is_number_integer() || j["capacity_bytes"].get<int64_t>() <= 0)
      fail("/capacity_bytes", "must be an integer > 0");
    t.capacity_bytes = j["capacity_bytes"].get<int64_t>();
  }
  if (!j.contains("actions") || !j["actions"].is_array()) fail("/actions", "must be an array");
  const auto& actions = j["actions"];
  for (size_t i = 0; i < actions.size(); ++i) {
    const auto& a = actions[i];
    const std::string p = fmt::format("/actions/{}", i);
    if (!a.is_object()) fail(p, "must be an object");
    for (auto it = a.begin(); it != a.end(); ++it)
      if (it.key() != "action" && it.key() != "id" && it.key() != "size" && it.key() != "stream" && it.key() != "tag")
        fail(p + "/" + it.key(), "unknown key");
    MemoryAction m;
    // not a.value("action", ""): that throws nlohmann's type_error for a non-string action
    const std::string kind = a.contains("action") && a["action"].is_string() ? a["action"].get<std::string>() : "";
    if (kind == "alloc") m.kind = MemoryAction::Kind::alloc;
    else if (kind == "free") m.kind = MemoryAction::Kind::free;
    else if (kind == "free_requested") m.kind = MemoryAction::Kind::free_requested;
    else if (kind == "free_completed") m.kind = MemoryAction::Kind::free_completed;
    else fail(p + "/action", "must be \"alloc\", \"free\", \"free_requested\" or \"free_completed\"");
    if (!a.contains("id") || !a["id"].is_number_integer()) fail(p + "/id", "must be an integer");
    m.id = a["id"].get<int64_t>();
    if (m.kind == MemoryAction::Kind::alloc) {
      if (!a.contains("size") || !a["size"].is_number_integer() || a["size"].get<int64_t>() <= 0 ||
          a["size"].get<int64_t>() > kMaxMemoryBytes)
        fail(p + "/size", fmt::format("must be an integer in [1, {}]", kMaxMemoryBytes));
      m.size = a["size"].get<int64_t>();
    }
    if (a.contains("stream")) {
      if (!a["stream"].is_number_integer()) fail(p + "/stream", "must be an integer");
      m.stream = a["stream"].get<int64_t>();
    }
    if (a.contains("tag")) {
      if (!a["tag"].is_string()) fail(p + "/tag", "must be a string");
      m.tag = a["tag"].get<std::string>();
    }
    t.actions.push_back(std::move(m));
  }
  return t;
}

GrowthVerdict detect_unbounded_growth(const std::vector<std::pair<int64_t, int64_t>>& samples) {
  GrowthVerdict g;
  const size_t n = samples.size();
  if (n < 16) return g;
  auto peaks = [&](size_t q) {
    std::pair<int64_t, int64_t> p{0, 0};
    for (size_t i = q * n / 4; i < (q + 1) * n / 4; ++i) {
      p.first = std::max(p.first, samples[i].first);
      p.second = std::max(p.second, samples[i].second);
    }
    return p;
  };
  const auto q2 = peaks(1), q3 = peaks(2), q4 = peaks(3);
  g.reserved_from = q2.first;
  g.reserved_to = q4.first;
  g.held_peak_early = q2.second;
  g.held_peak_late = q4.second;
  const int64_t rise = q4.first - q2.first;
  const bool rising = q2.first < q3.first && q3.first < q4.first &&
                      rise >= std::max<int64_t>(int64_t{2} << 20, q2.first / 20);
  const bool flat = q4.second <= q2.second + q2.second / 100 + (int64_t{1} << 20);
  if (!rising || !flat) return g;
  g.unbounded = true;
  g.bytes_per_1000_actions = static_cast<double>(rise) * 1000.0 / static_cast<double>(n / 2);
  g.message = fmt::format("reserved grows without bound: +{} per 1000 actions ({} -> {} over the second half) while "
                          "the bytes the program holds peak at {} throughout",
                          format_bytes(static_cast<int64_t>(g.bytes_per_1000_actions)), format_bytes(q2.first),
                          format_bytes(q4.first), format_bytes(q4.second));
  return g;
}

std::string ReplayResult::verdict() const {
  if (oom)
    return fmt::format("OOM at action {}{}", oom_action, oom_pending ? " (pending frees)" : "");
  if (growth.unbounded)
    return fmt::format("grows +{} per 1000 actions", format_bytes(static_cast<int64_t>(growth.bytes_per_1000_actions)));
  return "ok";
}

std::string setting_label(const AllocatorConfig& c) {
  std::string l = to_string(c.kind);
  if (c.max_split_size > 0) l += ", max_split_size " + format_bytes(c.max_split_size);
  if (c.garbage_collection_threshold > 0) l += fmt::format(", garbage_collection_threshold {:g}", c.garbage_collection_threshold);
  std::string divisions;  // as PYTORCH_CUDA_ALLOC_CONF writes them: interval start (MiB) : divisions
  for (size_t i = 0; i < c.roundup_power2_divisions.size(); ++i)
    if (c.roundup_power2_divisions[i] > 1)
      divisions += fmt::format("{}{}:{}", divisions.empty() ? "" : ",", int64_t{1} << i, c.roundup_power2_divisions[i]);
  if (!divisions.empty()) l += ", roundup_power2_divisions [" + divisions + "]";
  return l;
}

namespace {
bool same_setting(const AllocatorConfig& a, const AllocatorConfig& b) {
  return a.kind == b.kind && a.max_split_size == b.max_split_size &&
         a.garbage_collection_threshold == b.garbage_collection_threshold &&
         a.roundup_power2_divisions == b.roundup_power2_divisions;
}
// a setting as the advice names it: direct is no PyTorch allocator of its own name
std::string advice_label(const ReplayResult& r) {
  const AllocatorConfig& c = r.config;
  if (r.label != setting_label(c) && r.label.find(" (recorded)") == std::string::npos) return r.label;  // a named variant
  if (c.kind == AllocatorKind::direct)
    return "direct (one segment per allocation, no cache: PYTORCH_NO_CUDA_MEMORY_CACHING=1)";
  if (c.kind == AllocatorKind::expandable)
    return c.max_split_size > 0 ? "expandable_segments with max_split_size " + format_bytes(c.max_split_size)
                                : "expandable_segments";
  if (c.kind == AllocatorKind::caching && (c.max_split_size > 0 || c.garbage_collection_threshold > 0)) {
    // not "caching, max_split_size": one setting
    std::string l = "caching with ";
    if (c.max_split_size > 0) l += "max_split_size " + format_bytes(c.max_split_size);
    if (c.garbage_collection_threshold > 0)
      l += fmt::format("{}garbage_collection_threshold {:g}", c.max_split_size > 0 ? " and " : "",
                       c.garbage_collection_threshold);
    return l;
  }
  return setting_label(c);
}
std::string join_and(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
  return out;
}
}  // namespace

std::string advice_from_replays(const AllocatorConfig& failed, const std::vector<ReplayResult>& replays,
                                const std::string& what, int64_t sufficient_capacity, const std::string& sufficient_label,
                                const std::string& other_advice, const std::function<std::string(int64_t)>& where) {
  std::vector<std::string> ok, out, out_verdicts;
  ReplayResult failed_row;
  failed_row.config = failed;
  failed_row.label = setting_label(failed);
  std::vector<const ReplayResult*> seen{&failed_row};
  for (const auto& r : replays) {
    // a setting replayed twice (the recorded settings' row and the same setting asked for) once
    if (std::any_of(seen.begin(), seen.end(), [&](const ReplayResult* q) {
          return same_setting(q->config, r.config) && (q->label == r.label || advice_label(*q) == advice_label(r));
        }))
      continue;
    seen.push_back(&r);
    std::string label = advice_label(r);
    if (r.verdict() == "ok") {
      const auto gloss = label.find(" (");
      ok.push_back(gloss == std::string::npos
                       ? fmt::format("{} (peak reserved {})", label, format_bytes(r.peak_reserved))
                       : fmt::format("{} (peak reserved {}; {}", label.substr(0, gloss), format_bytes(r.peak_reserved),
                                     label.substr(gloss + 2)));
    } else {
      out.push_back(label);
      out_verdicts.push_back(r.oom && where ? fmt::format("OOM at {}{}", where(r.oom_action),
                                                          r.oom_pending ? " (pending frees)" : "")
                                            : r.verdict());
    }
  }
  std::string a;
  const bool one_verdict = std::all_of(out_verdicts.begin(), out_verdicts.end(),
                                       [&](const std::string& v) { return v == out_verdicts.front(); });
  if (!one_verdict)
    for (size_t i = 0; i < out.size(); ++i) out[i] += " (" + out_verdicts[i] + ")";
  const std::string common = one_verdict && !out.empty() ? " (" + out_verdicts.front() + ")" : "";
  const std::string others_fail =
      out.empty() ? "" : fmt::format("; {} do{} not{}", join_and(out), out.size() == 1 ? "es" : "", common);
  if (!ok.empty()) {
    a = fmt::format("of the other settings replayed on {}, {}{} complete{} them: use {}{}", what,
                    out.empty() ? "" : "only ", join_and(ok), ok.size() == 1 ? "s" : "", ok.size() == 1 ? "it" : "one of them",
                    others_fail);
  } else {
    a = out.empty() ? fmt::format("no other setting was replayed on {}", what)
                    : fmt::format("none of the other settings replayed on {} completes them: {} {}{}", what,
                                  join_and(out), out.size() == 1 ? "does not" : "do not either", common);
    if (sufficient_capacity > 0)
      a += fmt::format("; a capacity of {} would have sufficed ({} reserves at most that for them)",
                       format_bytes(sufficient_capacity), sufficient_label);
  }
  if (!other_advice.empty()) {
    // "with caching and max_split_size 20.0 MiB itself", not "with caching with ... itself" (tester63c F10)
    std::string own = advice_label(failed_row);
    if (own.rfind("caching with ", 0) == 0) own = "caching and " + own.substr(13);
    a += fmt::format("; with {} itself: {}", own, other_advice);
  }
  return a;
}

void advise_from_replays(std::vector<ReplayResult>& rows, const std::string& what,
                         const std::function<ReplayResult(const AllocatorConfig&)>& replay_unlimited,
                         const std::function<std::string(int64_t)>& where,
                         const std::vector<AllocatorConfig>& candidates) {
  bool any_oom = false;
  for (const auto& r : rows) any_oom = any_oom || r.oom;
  if (!any_oom) return;
  // the rows, and each candidate setting no row has, replayed at its own capacity
  std::vector<ReplayResult> all = rows;
  if (replay_unlimited)
    for (const auto& c : candidates)
      if (std::none_of(all.begin(), all.end(), [&](const ReplayResult& r) { return same_setting(r.config, c); }))
        all.push_back(replay_unlimited(c));
  bool any_ok = false;
  for (const auto& r : all) any_ok = any_ok || r.verdict() == "ok";
  int64_t sufficient = 0;
  std::string sufficient_label;
  if (!any_ok && replay_unlimited) {
    for (const auto& r : all) {
      AllocatorConfig c = r.config;
      c.capacity_bytes = kMaxMemoryBytes;
      const ReplayResult u = replay_unlimited(c);
      if (u.oom) continue;
      if (sufficient == 0 || u.peak_reserved < sufficient) sufficient = u.peak_reserved, sufficient_label = u.label;
    }
  }
  for (auto& r : rows) {
    if (!r.oom) continue;
    r.oom_advice = advice_from_replays(r.config, all, what, sufficient, sufficient_label, r.oom_other_advice, where);
    r.oom_message = r.oom_explanation + " Advice: " + r.oom_advice + r.oom_note;
  }
}

namespace {
constexpr int64_t kNoStop = -1;

const char* kind_name(MemoryAction::Kind k) {
  switch (k) {
    case MemoryAction::Kind::alloc: return "alloc";
    case MemoryAction::Kind::free: return "free";
    case MemoryAction::Kind::free_requested: return "free_requested";
    case MemoryAction::Kind::free_completed: return "free_completed";
    case MemoryAction::Kind::empty_cache: return "empty_cache";
    case MemoryAction::Kind::compact: return "compact";
  }
  return "alloc";
}

// The replay; with stop_after >= 0 it stops after that action and takes the full figures of the
// layout then (the second pass of replay_actions).
ReplayResult replay_pass(const std::vector<MemoryAction>& actions, const std::vector<InitialBlock>& initial,
                         const AllocatorConfig& config, const std::string& origin, bool lenient, int64_t stop_after, bool* exact) {
  ReplayResult r;
  r.config = config;
  r.config.back_with_memory = false;
  r.label = setting_label(config);
  auto alloc = DeviceAllocator::create(r.config);
  struct Live {
    Allocation a;
    bool pending = false;
  };
  int64_t requested = 0;  // bytes the program holds (asked for and not freed): the growth test's "allocated"
  std::unordered_map<int64_t, Live> live;
  int64_t pending_bytes = 0;
  int64_t sampled_peak = 0;
  std::vector<std::pair<int64_t, int64_t>> samples;
  samples.reserve(actions.size());
  auto where = [&](size_t i) { return actions[i].entry >= 0 ? actions[i].entry : static_cast<int64_t>(i); };
  auto on_oom = [&](const DeviceOutOfMemory& e, int64_t at, int64_t bytes) {
    r.oom = true;
    r.oom_action = at;
    r.oom_explanation = e.explanation;
    r.oom_advice = e.what();
    if (const auto at_advice = r.oom_advice.rfind(" Advice: "); at_advice != std::string::npos)
      r.oom_advice = r.oom_advice.substr(at_advice + 9);
    r.oom_other_advice = e.other_advice;
    r.pending_bytes_at_oom = pending_bytes;
    const MemoryStats st = alloc->stats();
    r.fragmentation_at_oom = st.external_fragmentation;
    r.memviz_at_oom = st.memviz_fragmentation;
    r.largest_free_at_oom = st.largest_free_block;
    const int64_t rounded = round_size(bytes);
    if (pending_bytes > 0 && st.capacity - st.allocated < rounded && st.capacity - st.allocated + pending_bytes >= rounded) {
      r.oom_pending = true;
      r.oom_note = fmt::format(
          " Pending frees: {} in blocks freed on another stream (free_requested) had not completed (free_completed); "
          "they were not reusable yet, and with them the request of {} would have had enough free bytes",
          format_bytes(pending_bytes), format_bytes(bytes));
    } else if (pending_bytes > 0) {
      r.oom_note = fmt::format(" ({} were pending in blocks whose free had not completed)", format_bytes(pending_bytes));
    }
    r.oom_message = std::string(e.what()) + r.oom_note;
  };
  // PyTorch's malloc (c10/cuda/CUDACachingAllocator.cpp): when a new segment fails even after
  // release_available_cached_blocks, release_cached_blocks first waits for the events of blocks
  // freed on other streams ("synchronize_and_free_events(context)": "First ensure that all blocks
  // that can't currently be allocated due to outstanding events are returned to the pool"), then
  // releases every whole free segment (release_blocks) and tries a new segment once more. So a
  // pending free (record_stream) delays an allocation, it does not make it fail: the pending blocks
  // are freed here (in id order), the cache released, and the request tried again. Their later
  // free_completed entries are then no-ops (`synchronized`).
  std::unordered_set<int64_t> synchronized;
  auto allocate = [&](int64_t bytes, const std::string& tag, int64_t stream) -> Allocation {
    try {
      return alloc->allocate_on(bytes, tag, stream);
    } catch (const DeviceOutOfMemory&) {
      if (pending_bytes == 0) throw;
      std::vector<int64_t> ids;
      for (const auto& [id, l] : live)
        if (l.pending) ids.push_back(id);
      std::sort(ids.begin(), ids.end());
      for (const int64_t id : ids) {
        alloc->free(live[id].a);
        live.erase(id);
        synchronized.insert(id);
      }
      pending_bytes = 0;
      ++r.synchronized_waits;
      alloc->empty_cache();
      return alloc->allocate_on(bytes, tag, stream);
    }
  };
  auto after = [&]() {
    const int64_t reserved = alloc->reserved_bytes();
    if (reserved > r.peak_reserved) {
      // a new peak; the full figures walk every block, so they are taken when the peak grew
      // by 1% or more since they were last taken (keeps long traces linear)
      if (reserved >= sampled_peak + sampled_peak / 100 || sampled_peak == 0) {
        const MemoryStats st = alloc->stats();
        r.fragmentation_at_peak = st.external_fragmentation;
        r.memviz_at_peak = st.memviz_fragmentation;
        r.segments_at_peak = st.segments;
        sampled_peak = reserved;
      }
      r.peak_reserved = reserved;
      r.peak_reserved_action = static_cast<int64_t>(samples.size());  // the index of the action just replayed
    }
    r.peak_allocated = std::max(r.peak_allocated, alloc->allocated_bytes());
    r.peak_requested = std::max(r.peak_requested, requested);
    samples.emplace_back(reserved, requested);
  };
  for (const auto& b : initial) {
    try {
      live[b.id] = {alloc->allocate_on(b.size, "before the trace", b.stream), b.pending};
      if (b.pending) pending_bytes += live[b.id].a.size;
      else requested += b.size;
    } catch (const DeviceOutOfMemory& e) {
      on_oom(e, -1, b.size);
      break;
    }
  }
  for (size_t i = 0; i < actions.size() && !r.oom; ++i) {
    const MemoryAction& a = actions[i];
    auto it = live.find(a.id);
    try {
    switch (a.kind) {
      case MemoryAction::Kind::alloc:
        if (it != live.end()) {
          if (!lenient) throw SpecError(fmt::format("{}: /actions/{}/id: id {} is already allocated", origin, i, a.id));
          break;
        }
        try {
          live[a.id] = {allocate(a.size, a.tag.empty() ? "unknown" : a.tag, a.stream), false};
          requested += a.size;
        } catch (const DeviceOutOfMemory& e) {
          on_oom(e, where(i), a.size);
        }
        break;
      case MemoryAction::Kind::free:
      case MemoryAction::Kind::free_requested:
      case MemoryAction::Kind::free_completed:
        if (it == live.end() && a.kind != MemoryAction::Kind::free_requested && synchronized.erase(a.id) > 0)
          break;  // freed when the allocator waited for its event before an OOM (above)
        if (it == live.end()) {
          if (!lenient)
            throw SpecError(fmt::format("{}: /actions/{}/id: free of id {}, which is not allocated", origin, i, a.id));
          ++r.skipped_frees;
          break;
        }
        if (a.kind == MemoryAction::Kind::free_requested) {
          if (!it->second.pending) {
            pending_bytes += it->second.a.size;
            requested -= it->second.a.requested;
          }
          it->second.pending = true;
          break;
        }
        if (it->second.pending) pending_bytes -= it->second.a.size;
        else requested -= it->second.a.requested;
        alloc->free(it->second.a);
        live.erase(it);
        break;
      case MemoryAction::Kind::empty_cache: alloc->empty_cache(); break;
      case MemoryAction::Kind::compact: {
        // DeviceArena::compact: every live block out, the cache released, the blocks allocated
        // again largest first (address order among equals); pending blocks stay where they are
        std::vector<std::pair<int64_t, Live*>> moved;
        for (auto& [id, l] : live)
          if (!l.pending) moved.emplace_back(id, &l);
        std::sort(moved.begin(), moved.end(), [](const auto& x, const auto& y) {
          return x.second->a.size != y.second->a.size ? x.second->a.size > y.second->a.size
                                                      : x.second->a.address < y.second->a.address;
        });
        for (auto& [id, l] : moved) alloc->free(l->a);
        alloc->empty_cache();
        for (auto& [id, l] : moved) {
          try {
            l->a = alloc->allocate_on(l->a.requested, "compacted", 0);
          } catch (const DeviceOutOfMemory& e) {
            on_oom(e, where(i), l->a.requested);
            live.erase(id);
            break;
          }
        }
        break;
      }
    }
    } catch (const std::logic_error& e) {
      // the allocator model could not apply an action of a recorded trace (snap54, tester54 F4:
      // "error: address 0x100000000 is in no segment", exit 1, naming nothing): bad input,
      // named by its origin and entry (SpecError: exit 2)
      if (!lenient) throw;
      throw SpecError(fmt::format("{}: entry {} ({} of {} B): the allocator model cannot replay it ({}): the entry "
                                  "contradicts the entries before it",
                                  origin, where(i), kind_name(a.kind), a.size, e.what()));
    }
    if (!r.oom) after();
    if (stop_after >= 0 && static_cast<int64_t>(i) == stop_after) {
      const MemoryStats st = alloc->stats();
      r.fragmentation_at_peak = st.external_fragmentation;
      r.memviz_at_peak = st.memviz_fragmentation;
      r.segments_at_peak = st.segments;
      return r;
    }
  }
  if (exact) *exact = sampled_peak == r.peak_reserved;
  const MemoryStats end = alloc->stats();
  r.final_reserved = end.reserved;
  r.final_segments = end.segments;
  r.growth = detect_unbounded_growth(samples);
  return r;
}

}  // namespace

ReplayResult replay_actions(const std::vector<MemoryAction>& actions, const std::vector<InitialBlock>& initial,
                            const AllocatorConfig& config, const std::string& origin, bool lenient) {
  bool exact = true;
  ReplayResult r = replay_pass(actions, initial, config, origin, lenient, kNoStop, &exact);
  // the figures were sampled when the peak grew by 1%; a later, smaller growth moved the peak:
  // replay again up to it and take them there (tester41 #7: 9.1% "at peak" beside the recording's
  // figure at peak reserved)
  if (!exact && r.peak_reserved_action >= 0) {
    const ReplayResult at = replay_pass(actions, initial, config, origin, lenient, r.peak_reserved_action, nullptr);
    r.fragmentation_at_peak = at.fragmentation_at_peak;
    r.memviz_at_peak = at.memviz_at_peak;
    r.segments_at_peak = at.segments_at_peak;
  }
  return r;
}

ReplayResult replay(const MemoryTrace& trace, const AllocatorConfig& config, const std::string& origin) {
  return replay_actions(trace.actions, {}, config, origin, false);
}

}  // namespace embedscope::engine
