// import_torch_memory_snapshot: a PyTorch CUDA memory snapshot into a session (import.h).

#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::sessions::torch_snapshot {

namespace {

/// JSON text of `j` with any string that is not valid UTF-8 (a pickle's str or bytes may hold
/// anything) written with U+FFFD for its bad bytes: nlohmann's plain dump() throws type_error 316.
std::string dump_text(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// A value of an unknown key as JSON (settings keep every key PyTorch wrote).
nlohmann::json to_json(const pickle::Value& v, int depth = 0) {
  using K = pickle::Value::Kind;
  if (depth > 32) return nullptr;
  switch (v.kind()) {
    case K::none: return nullptr;
    case K::boolean: return v.as_bool();
    case K::integer: return v.as_int();
    case K::unsigned_integer: return v.as_uint();
    case K::floating: return v.as_double();
    case K::string: return v.as_string();
    case K::bytes: return fmt::format("<{} bytes>", v.as_string().size());
    case K::list:
    case K::tuple: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& x : v.items()) a.push_back(to_json(x, depth + 1));
      return a;
    }
    case K::dict: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, x] : v.pairs()) o[k.is_string() ? k.as_string() : dump_text(to_json(k))] = to_json(x, depth + 1);
      return o;
    }
  }
  return nullptr;
}

std::string settings_json(const AllocatorSettings& s) {
  nlohmann::json j = nlohmann::json::object();
  if (!s.present) return dump_text(j);
  j["max_split_size"] = s.max_split_size;
  j["expandable_segments"] = s.expandable_segments;
  j["garbage_collection_threshold"] = s.garbage_collection_threshold;
  j["PYTORCH_CUDA_ALLOC_CONF"] = s.conf;
  nlohmann::json r = nlohmann::json::object();
  for (const auto& [k, v] : s.roundup_power2_divisions) r[k] = v;
  j["roundup_power2_divisions"] = r;
  for (const auto& [k, v] : s.extra) j[k] = to_json(v);
  return dump_text(j);
}

std::string innermost(const MemorySnapshotFile& s, int32_t stack) {
  const auto& frames = s.stacks.at(static_cast<size_t>(stack));
  return frames.empty() ? "" : s.frames[static_cast<size_t>(frames[0])].name;
}

}  // namespace

ImportSummary import_torch_memory_snapshot(const MemorySnapshotFile& snap, const std::string& source, SessionWriter& w) {
  return import_torch_memory_snapshots({{&snap, source}}, w);
}

namespace {
// FNV-1a over what makes a dump one process's at one moment: every segment (device, address,
// sizes) and every trace entry (action, address, size, time): two files with the same value are
// the same snapshot (a copy, or the .pickle and its .pickle.gz), not two processes of a job.
uint64_t snapshot_fingerprint(const MemorySnapshotFile& snap) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const auto& s : snap.segments) {
    mix(static_cast<uint64_t>(s.device));
    mix(s.address);
    mix(static_cast<uint64_t>(s.total_size));
    mix(static_cast<uint64_t>(s.allocated_size));
  }
  for (const auto& t : snap.device_traces) {
    mix(t.size());
    for (const auto& e : t) {
      mix(static_cast<uint64_t>(e.action));
      mix(e.addr);
      mix(static_cast<uint64_t>(e.size));
      mix(static_cast<uint64_t>(e.time_us));
    }
  }
  return h;
}

// One snapshot named twice (the same path under two spellings, a copy, or FILE.pickle beside
// FILE.pickle.gz) would be imported as the devices of two processes (tester47 F13: 4 ranks and
// twice the job's memory): refused, as a trace named twice is (kineto_json.cpp).
void refuse_snapshot_given_twice(const std::vector<SnapshotInput>& inputs) {
  std::map<std::string, std::string> seen_path;
  std::map<uint64_t, std::string> seen_content;
  for (const auto& in : inputs) {
    std::error_code ec;
    const auto canon = std::filesystem::weakly_canonical(in.source, ec);
    if (auto [it, fresh] = seen_path.try_emplace(ec ? in.source : canon.string(), in.source); !fresh)
      throw SnapshotError(fmt::format("{}: given twice ({} and {}); each memory snapshot is one process's: name it once",
                                      in.source, it->second, in.source));
    if (auto [it, fresh] = seen_content.try_emplace(snapshot_fingerprint(*in.snap), in.source); !fresh)
      throw SnapshotError(fmt::format("{}: the same memory snapshot as {} (identical segments and trace entries: a copy, "
                                      "or the file compressed); each snapshot is one process's: import it once",
                                      in.source, it->second));
  }
}
}  // namespace

ImportSummary import_torch_memory_snapshots(const std::vector<SnapshotInput>& inputs, SessionWriter& w) {
  refuse_snapshot_given_twice(inputs);
  // a dump with nothing in it is refused, as a trace without events is (tester37 #8: 'world size 0')
  for (const auto& in : inputs) {
    bool any = !in.snap->segments.empty();
    for (const auto& t : in.snap->device_traces) any = any || !t.empty();
    if (!any) {  // say what is there: PyTorch writes one device_traces list per visible GPU (robust55)
      const size_t n = in.snap->device_traces.size();
      const std::string lists =
          n == 0   ? std::string("it has no device_traces list")
          : n == 1 ? std::string("its one device_traces list (device 0) is empty")
                   : fmt::format("each of its {} device_traces lists (devices 0-{}) is empty", n, n - 1);
      throw SnapshotError(fmt::format("{}: the memory snapshot holds no segment and no trace entry (its segments list "
                                      "is empty and {}): nothing was recorded - nothing was allocated, or it was "
                                      "dumped before the workload; no session written",
                                      in.source, lists));
    }
  }
  ImportSummary sum;
  const bool one = inputs.size() == 1;
  // ranks: the devices that hold anything (MemorySnapshotFile::used_devices), in argument order;
  // a device with no segment and an empty trace list is a visible GPU the process did not use
  // (PyTorch writes one list per visible GPU; snap54, tester54 F2: 7 empty lists of a one-GPU
  // process on an 8-GPU node were 7 ranks with a false no_memory_history error each)
  struct RankOf {
    size_t input;
    int64_t device;
  };
  std::vector<RankOf> ranks;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const MemorySnapshotFile& snap = *inputs[k].snap;
    for (int64_t d : snap.used_devices()) ranks.push_back({k, d});
    sum.frames += static_cast<int64_t>(snap.frames.size());
    sum.stacks += static_cast<int64_t>(snap.stacks.size());
  }
  sum.devices = static_cast<int64_t>(ranks.size());
  // one clock: PyTorch's time_us are Unix microseconds, the earliest of all files is 0
  int64_t t0 = INT64_MAX;
  for (const auto& in : inputs)
    for (const auto& t : in.snap->device_traces)
      for (const auto& e : t)
        if (e.time_us > 0) t0 = std::min(t0, e.time_us);
  if (t0 == INT64_MAX) t0 = 0;

  importers::ImportProblems problems;
  w.set_metadata(meta::kImported, "1");
  w.set_metadata(meta::kImportFormat, "torch_memory_snapshot");
  w.set_metadata(meta::kImportProducer, "PyTorch CUDA caching allocator (torch.cuda.memory._dump_snapshot)");
  {
    nlohmann::json sources = nlohmann::json::array();
    for (size_t k = 0; k < inputs.size(); ++k) {
      std::error_code ec;
      const auto bytes = std::filesystem::file_size(inputs[k].source, ec);
      nlohmann::json j{{"file", inputs[k].source}, {"bytes", ec ? -1 : static_cast<int64_t>(bytes)}};
      if (!one) {
        nlohmann::json rs = nlohmann::json::array();
        for (size_t r = 0; r < ranks.size(); ++r)
          if (ranks[r].input == k) rs.push_back(r);
        j["ranks"] = rs;
      }
      sources.push_back(j);
    }
    w.set_metadata(meta::kImportSources, dump_text(sources));
  }
  const std::string settings = settings_json(inputs.front().snap->settings);
  w.set_metadata(meta::kAllocatorSettingsJson, settings);
  for (size_t k = 1; k < inputs.size(); ++k)
    if (settings_json(inputs[k].snap->settings) != settings)
      problems.add("allocator_settings_differ", importers::Severity::info, {inputs[k].source, -1},
                   fmt::format("its allocator settings differ from {}'s, which are the ones stored", inputs.front().source));
  w.set_metadata(meta::kWorldSize, std::to_string(sum.devices));
  w.set_metadata(meta::kSimulated, "0");
  w.set_metadata(meta::kBackend, "cuda");
  const std::string& first = inputs.front().source;
  w.set_metadata(meta::kWorkloadName, first.substr(first.find_last_of('/') + 1) +
                                          (one ? std::string() : fmt::format(" and {} more", inputs.size() - 1)));
  w.set_metadata(meta::kClock, "PyTorch memory history time_us x 1000: ns since the earliest trace entry");
  w.set_metadata(meta::kWallAnchorUnixNs, std::to_string(t0 * 1000));

  // frames and stacks of every file in one table each: file k's frame f is frame_base[k] + f,
  // its stack s (>= 1) stack_base[k] + s; stack 0 is the empty stack of every file
  std::vector<int32_t> frame_base(inputs.size(), 0), stack_base(inputs.size(), 0);
  std::vector<MemoryFrame> frames;
  std::vector<MemoryStackFrame> stacks;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const MemorySnapshotFile& snap = *inputs[k].snap;
    frame_base[k] = static_cast<int32_t>(frames.size());
    stack_base[k] = k == 0 ? 0 : stack_base[k - 1] + static_cast<int32_t>(std::max<size_t>(inputs[k - 1].snap->stacks.size(), 1) - 1);
    for (size_t i = 0; i < snap.frames.size(); ++i)
      frames.push_back({frame_base[k] + static_cast<int32_t>(i), snap.frames[i].filename, snap.frames[i].line, snap.frames[i].name});
    for (size_t st = 1; st < snap.stacks.size(); ++st)
      for (size_t d = 0; d < snap.stacks[st].size(); ++d)
        stacks.push_back({stack_base[k] + static_cast<int32_t>(st), static_cast<int32_t>(d), frame_base[k] + snap.stacks[st][d]});
  }
  w.add_memory_frames(frames);
  w.add_memory_stacks(stacks);

  bool process_start = true;
  for (size_t rk = 0; rk < ranks.size(); ++rk) {
    const MemorySnapshotFile& snap = *inputs[ranks[rk].input].snap;
    const std::string& source = inputs[ranks[rk].input].source;
    const int64_t dev = ranks[rk].device;
    const int32_t sbase = stack_base[ranks[rk].input];
    auto stack_id = [sbase](int32_t st) { return st > 0 ? sbase + st : st; };
    const auto rank = static_cast<int32_t>(rk);
    w.add_rank({rank, "", one ? fmt::format("cuda:{} (PyTorch memory snapshot)", dev)
                              : fmt::format("cuda:{} of {} (PyTorch memory snapshot)", dev,
                                            source.substr(source.find_last_of('/') + 1)),
                0});
    // the trace
    static const std::vector<TraceEntry> none;
    const auto& trace = dev < static_cast<int64_t>(snap.device_traces.size()) ? snap.device_traces[static_cast<size_t>(dev)] : none;
    // the layout over time first: it finds the entries that contradict the dump
    TimelineWalk walk = walk_timeline(snap, dev, t0);
    std::vector<MemoryEvent> events;
    events.reserve(trace.size());
    int64_t last_ns = 0;
    for (size_t i = 0; i < trace.size(); ++i) {
      const TraceEntry& e = trace[i];
      MemoryEvent m;
      m.rank = rank;
      m.time_ns = e.time_us > 0 ? (e.time_us - t0) * 1000 : 0;
      last_ns = std::max(last_ns, m.time_ns);
      m.action = to_string(e.action);
      m.address = static_cast<int64_t>(e.addr);
      m.size = e.size;
      m.requested = e.action == TraceAction::alloc || e.action == TraceAction::free_requested ||
                            e.action == TraceAction::free_completed || e.action == TraceAction::oom
                        ? e.size
                        : 0;
      if (auto o = walk.oversized.find(i); o != walk.oversized.end()) m.requested = o->second;  // see TimelineWalk
      m.tag = innermost(snap, e.stack);
      m.stream = e.stream;
      m.stack_id = stack_id(e.stack);
      events.push_back(std::move(m));
    }
    sum.trace_entries += static_cast<int64_t>(events.size());
    w.add_memory_events(events);
    if (trace.empty())  // segments only: the usual cause, _dump_snapshot without _record_memory_history
      problems.add("no_memory_history", importers::Severity::error, {source, -1},
                   fmt::format("device {} has no trace entries: memory history was not recorded (call "
                               "torch.cuda.memory._record_memory_history() before the workload, then _dump_snapshot()); "
                               "only the segments and blocks at the dump are imported",
                               dev));
    // the segments and blocks at the dump
    MemorySnapshot shot;
    shot.rank = rank;
    shot.time_ns = last_ns;
    shot.reason = "dump";
    MemoryCounter at_dump;
    at_dump.rank = rank;
    for (const auto& s : snap.segments) {
      if (s.device != dev) continue;
      ++sum.segments;
      at_dump.reserved += s.total_size;
      ++at_dump.segments;
      // tester49 F8: a segment smaller than its own blocks (a damaged or hand-edited dump): its
      // reserved figure cannot be right; kept as the dump says, and said
      int64_t block_bytes = 0;
      for (const auto& b : s.blocks) block_bytes += b.size;
      if (block_bytes > s.total_size) {
        std::string text = fmt::format(
            "device {} segment at 0x{:x}: total_size {} B, but its {} block(s) hold {} B: the dump's reserved "
            "figures (segments, Memory page at the dump) count the segment's total_size, not its blocks",
            dev, s.address, s.total_size, s.blocks.size(), block_bytes);
        problems.add("segment_smaller_than_blocks", importers::Severity::error, {source, -1}, text);
        sum.problems.push_back(one ? std::move(text) : source + ": " + text);
      }
      for (const auto& b : s.blocks) {
        ++sum.blocks;
        MemoryBlockRecord r;
        r.segment_address = static_cast<int64_t>(s.address);
        r.segment_size = s.total_size;
        r.address = static_cast<int64_t>(b.address);
        r.size = b.size;
        r.requested = b.state == BlockState::inactive ? 0 : b.requested_size;
        r.allocated = b.state != BlockState::inactive;
        r.pending_free = b.state == BlockState::active_pending_free;
        r.tag = r.allocated ? innermost(snap, b.stack) : "";
        r.stream = s.stream;
        r.stack_id = stack_id(b.stack);
        if (b.state == BlockState::active_allocated) {
          at_dump.allocated += b.size;
          at_dump.rounding_loss += b.size - b.requested_size;
        }
        shot.blocks.push_back(std::move(r));
      }
    }
    // the counters over time
    process_start = process_start && (walk.starts_empty || trace.empty());  // no trace: not "mid-way"
    for (size_t i = 0; i < walk.problems.size(); ++i) {
      problems.add(walk.problem_names[i], importers::Severity::error, {source, -1}, walk.problems[i]);
      sum.problems.push_back(one ? std::move(walk.problems[i]) : source + ": " + walk.problems[i]);
    }
    for (const auto& p : walk.points) {
      at_dump.peak_allocated = std::max(at_dump.peak_allocated, p.allocated);
      at_dump.peak_reserved = std::max(at_dump.peak_reserved, p.reserved);
    }
    at_dump.peak_allocated = std::max(at_dump.peak_allocated, at_dump.allocated);
    at_dump.peak_reserved = std::max(at_dump.peak_reserved, at_dump.reserved);
    // fragmentation at the dump, from its inactive blocks (allocator.h's definitions)
    int64_t free_bytes = 0;
    double gap_sq = 0, seg_total = 0;
    for (const auto& s : snap.segments) {
      if (s.device != dev) continue;
      seg_total += static_cast<double>(s.total_size);
      for (const auto& b : s.blocks)
        if (b.state == BlockState::inactive) {
          free_bytes += b.size;
          at_dump.largest_free_block = std::max(at_dump.largest_free_block, b.size);
          gap_sq += static_cast<double>(b.size) * static_cast<double>(b.size);
        }
    }
    at_dump.external_fragmentation =
        free_bytes > 0 ? 1.0 - static_cast<double>(at_dump.largest_free_block) / static_cast<double>(free_bytes) : 0.0;
    at_dump.memviz_fragmentation = seg_total > 0 ? gap_sq / (seg_total * seg_total) : 0.0;  // MemoryViz.js calculate_fragmentation
    for (auto& p : walk.points) p.rank = rank;  // walk_timeline numbers them by device
    w.add_memory_timeline(walk.points);
    w.add_memory(at_dump);
    w.add_snapshot(std::move(shot));
  }
  sum.starts_at_process_start = process_start;
  w.set_metadata(meta::kMemoryTraceStart, sum.trace_entries == 0       ? "not_recorded"
                                          : sum.starts_at_process_start ? "process_start"
                                                                        : "mid_way");
  sum.import_stats = problems.records();
  w.add_import_stats(sum.import_stats);  // as the trace importers do: stats and the workbench list them
  return sum;
}

ImportSummary import_torch_memory_snapshot(const std::string& path, SessionWriter& w) {
  return import_torch_memory_snapshot(load_snapshot(path), path, w);
}

}  // namespace embedscope::sessions::torch_snapshot
