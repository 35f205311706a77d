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

namespace embedscope::engine {

MemoryTrace load_memory_trace(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw SpecError(fmt::format("{}: is a directory, not a trace", path));
  std::ifstream f(path);
  if (!f) throw SpecError(fmt::format("{}: cannot open", path));
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
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
  return l;
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
    r.oom_message = e.what();
    r.pending_bytes_at_oom = pending_bytes;
    const MemoryStats st = alloc->stats();
    const int64_t rounded = round_size(bytes);
    if (pending_bytes > 0 && st.capacity - st.allocated < rounded && st.capacity - st.allocated + pending_bytes >= rounded) {
      r.oom_pending = true;
      r.oom_message += fmt::format(
          " Pending frees: {} in blocks freed on another stream (free_requested) had not completed (free_completed); "
          "they were not reusable yet, and with them the request of {} would have had enough free bytes",
          format_bytes(pending_bytes), format_bytes(bytes));
    } else if (pending_bytes > 0) {
      r.oom_message += fmt::format(" ({} were pending in blocks whose free had not completed)", format_bytes(pending_bytes));
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
          live[a.id] = {alloc->allocate_on(a.size, a.tag.empty() ? "unknown" : a.tag, a.stream), false};
          requested += a.size;
        } catch (const DeviceOutOfMemory& e) {
          on_oom(e, where(i), a.size);
        }
        break;
      case MemoryAction::Kind::free:
      case MemoryAction::Kind::free_requested:
      case MemoryAction::Kind::free_completed:
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
