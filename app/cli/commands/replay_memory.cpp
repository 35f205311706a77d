// `embedscope replay-memory`: replays a trace of alloc/free actions (JSON), or the device traces
// of a PyTorch CUDA memory snapshot (a pickle or gzip, detected by content), through allocator
// settings and compares reserved bytes, peaks, fragmentation, OOMs and unbounded growth (text or
// --json).

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/engine/memory/replay.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/memory/snapshot_replay.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/pickle.h"
#include "output/output.h"
#include "workload_args.h"  // kInteger

namespace embedscope::cli {

namespace es = embedscope::engine;
namespace ss = embedscope::sessions;
using nlohmann::json;

namespace {

// --allocator's kinds, each also with --max-split-size (caching, expandable) and, for caching, with
// --garbage-collection-threshold (the setting that collects: expandable ranges have no whole free
// segment to release, direct caches nothing)
std::vector<es::AllocatorConfig> parse_settings(const std::string& allocators, int64_t max_split, double gc, int64_t cap) {
  std::vector<es::AllocatorConfig> settings;
  std::string list = allocators.empty() ? "caching,expandable,direct" : allocators;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    // the kinds a replay takes (cuda_async, an allocator setting of runs, is not one of them)
    if (name == "cuda_async")
      throw es::SpecError("--allocator: cuda_async cannot be replayed: its cudaMallocAsync pool needs a GPU and hides its "
                          "layout; replay caching, expandable or direct");
    if (name != "caching" && name != "expandable" && name != "direct")
      throw es::SpecError(fmt::format("--allocator: must be one of caching, expandable, direct, got \"{}\"", name));
    const es::AllocatorKind kind = es::allocator_kind_from_string(name, "--allocator");
    settings.push_back({kind, cap, 0, false});
    if (kind != es::AllocatorKind::direct && max_split > 0) settings.push_back({kind, cap, max_split, false});
    if (kind == es::AllocatorKind::caching && gc > 0) settings.push_back({kind, cap, 0, false, gc});
    start = comma + 1;
  }
  return settings;
}

json result_json(const es::ReplayResult& r) {
  return {{"allocator", es::to_string(r.config.kind)}, {"max_split_size", r.config.max_split_size},
          {"garbage_collection_threshold", r.config.garbage_collection_threshold},
          {"label", r.label}, {"result", r.verdict()},
          {"oom", r.oom}, {"oom_action", r.oom_action}, {"oom_message", r.oom_message},
          {"oom_pending", r.oom_pending}, {"pending_bytes_at_oom", r.pending_bytes_at_oom},
          {"fragmentation_at_oom", r.oom ? json(r.fragmentation_at_oom) : json(nullptr)},
          {"memviz_fragmentation_at_oom", r.oom ? json(r.memviz_at_oom) : json(nullptr)},
          {"largest_free_block_at_oom_bytes", r.oom ? json(r.largest_free_at_oom) : json(nullptr)},
          {"synchronized_waits", r.synchronized_waits},
          {"peak_allocated_bytes", r.peak_allocated}, {"peak_requested_bytes", r.peak_requested},
          {"peak_reserved_bytes", r.peak_reserved},
          {"fragmentation_at_peak", r.fragmentation_at_peak}, {"memviz_fragmentation_at_peak", r.memviz_at_peak},
          {"segments_at_peak", r.segments_at_peak}, {"final_reserved_bytes", r.final_reserved},
          {"final_segments", r.final_segments},
          {"unbounded_growth", r.growth.unbounded},
          {"growth_bytes_per_1000_actions", r.growth.bytes_per_1000_actions},
          {"growth_message", r.growth.message}};
}

// tester43 F20: with max_split_size a request of max_split_size or more can be handed a whole
// cached block up to 20 MiB larger, unsplit (PyTorch's get_free_block and should_split: the
// caching allocator; expandable segments split every block), so "peak allocated" counts bytes
// the program never asked for.
// Said when it exceeds the program's own peak by more than max_split_size; "" otherwise.
std::string inflated_peak_note(const es::ReplayResult& r) {
  if (r.config.max_split_size <= 0 || r.peak_allocated - r.peak_requested <= r.config.max_split_size) return "";
  return fmt::format("peak allocated {} counts whole blocks of max_split_size ({}) or more handed unsplit to smaller "
                     "requests; the program itself held at most {} (requested bytes{})",
                     es::format_bytes(r.peak_allocated), es::format_bytes(r.config.max_split_size),
                     es::format_bytes(r.peak_requested), r.oom ? ", up to the OOM" : "");
}

void print_table(const std::vector<es::ReplayResult>& results) {
  // fragmentation, memviz and segments: when reserved bytes reached their peak (`stats` gives
  // the layout at peak allocated too, and at peak reserved as here)
  // the label column as wide as its longest label, 40 at least ("caching,
  // garbage_collection_threshold 0.5 (recorded)" is 52: it pushed its row's figures out of line)
  size_t w = 40;
  for (const auto& r : results) w = std::max(w, r.label.size());
  std::cout << fmt::format("{:<{}} {:>14} {:>14} {:>17} {:>10} {:>9}  {}\n", "allocator", w, "peak allocated",
                           "peak reserved", "frag (peak rsvd)", "memviz", "segments", "result");
  for (const auto& r : results)
    std::cout << fmt::format("{:<{}} {:>14} {:>14} {:>16.1f}% {:>10.3f} {:>9}  {}\n", r.label, w,
                             es::format_bytes(r.peak_allocated), es::format_bytes(r.peak_reserved),
                             100 * r.fragmentation_at_peak, r.memviz_at_peak, r.segments_at_peak, r.verdict());
  std::cout << "(fragmentation, memviz and segments: the layout when reserved bytes reached their peak)\n";
  for (const auto& r : results) {
    if (const std::string n = inflated_peak_note(r); !n.empty()) std::cout << fmt::format("\n{}: {}\n", r.label, n);
    if (r.oom) {
      // an OOM of a max_split_size setting: what the same allocator without it did (tester43 F20)
      std::string without;
      for (const auto& q : results)
        if (r.config.max_split_size > 0 && q.config.kind == r.config.kind && q.config.max_split_size == 0 &&
            q.config.garbage_collection_threshold == r.config.garbage_collection_threshold &&
            q.config.capacity_bytes == r.config.capacity_bytes)
          without = fmt::format(" ({} without max_split_size: {})", es::to_string(q.config.kind), q.verdict());
      // the layout it explains (tester63c F11: the table's figures are at peak reserved, before the frees)
      std::cout << fmt::format("\n{}: {}{}\n  at the OOM: fragmentation {:.1f}%, memviz {:.3f}, largest free block {}\n",
                               r.label, r.oom_message, without, 100 * r.fragmentation_at_oom, r.memviz_at_oom,
                               es::format_bytes(r.largest_free_at_oom));
    }
    if (r.growth.unbounded) std::cout << fmt::format("\n{}: {}\n", r.label, r.growth.message);
  }
}

// --capacity below the trace's own peak reserved: what the replay under the recorded settings
// did against what the recorded run did, each as it was (tester42 F25: "run out of memory where
// the recorded run did not" beside "the recorded run ran out of memory at entry 20088"). `own`:
// the recorded settings' replay; `recorded_ooms`: the trace's oom entries.
std::string capacity_note(int64_t capacity, int64_t peak_reserved, const es::ReplayResult& own,
                          const std::vector<int64_t>& recorded_ooms) {
  const std::string head = fmt::format("note: --capacity {} is below the trace's own peak reserved {}", es::format_bytes(capacity),
                                       es::format_bytes(peak_reserved));
  if (!own.oom)
    return head + ", yet the recorded settings did not run out of memory in the replay (their reserved bytes differ "
                  "from the recorded run's)\n";
  const std::string replay = fmt::format("the recorded settings run out of memory at action {}", own.oom_action);
  if (recorded_ooms.empty()) return fmt::format("{}: {}, where the recorded run did not run out of memory\n", head, replay);
  if (own.oom_action >= 0 && own.oom_action < recorded_ooms.front())
    return fmt::format("{}: {}, sooner than the recorded run, which reserved up to {} and ran out of memory only at entry "
                       "{}\n",
                       head, replay, es::format_bytes(peak_reserved), recorded_ooms.front());
  return fmt::format("{}: {} (the recorded run's own OOM: entry {})\n", head, replay, recorded_ooms.front());
}

int cmd_replay_snapshot(const std::string& file, const std::string& allocators, int64_t max_split, double gc,
                        int64_t capacity, int64_t device, bool as_json) {
  const ss::torch_snapshot::MemorySnapshotFile snap = ss::torch_snapshot::load_snapshot(file);
  const int64_t devices = snap.device_count();
  if (device >= devices)
    throw es::SpecError(fmt::format("--device {}: {} has {} device(s)", device, file, devices));
  // every device that holds anything (an unused GPU's empty trace list is none: snap54), or --device
  const std::vector<int64_t> replayed = device < 0 ? snap.used_devices() : std::vector<int64_t>{device};
  json jdevs = json::array();
  for (const int64_t d : replayed) {
    const int64_t from_oom = es::snapshot_capacity(snap, d);
    // The recorded run held peak_reserved at once, so the device had at least that much: a
    // capacity from the OOM below it (device_free shrinks when another process allocates, or
    // the dump's device_free is off) would make the recorded settings run out early. The larger
    // is used, and said. Its first entry at that peak and the fragmentation there are what the
    // verdict compares (as the workbench's Replay panel does).
    int64_t peak_reserved = 0;
    size_t at_peak = 0;
    const auto walk = ss::torch_snapshot::walk_timeline(snap, d, 0);
    const auto& points = walk.points;
    for (size_t i = 0; i < points.size(); ++i)
      if (points[i].reserved > peak_reserved) peak_reserved = points[i].reserved, at_peak = i;
    // a segment is reserved for the alloc that follows it (the replay sees both as one action):
    // the moment is after that alloc, as the Memory page takes it (memory_analysis.cpp)
    using Act = ss::torch_snapshot::TraceAction;
    static const std::vector<ss::torch_snapshot::TraceEntry> no_trace;
    const auto& trace = d < static_cast<int64_t>(snap.device_traces.size()) ? snap.device_traces[static_cast<size_t>(d)]
                                                                             : no_trace;
    while (at_peak + 1 < points.size() && at_peak < trace.size() &&
           (trace[at_peak].action == Act::segment_alloc || trace[at_peak].action == Act::segment_map) &&
           points[at_peak + 1].reserved == peak_reserved)
      ++at_peak;
    const double frag_at_peak_reserved = points.empty() ? 0.0 : points[at_peak].external_fragmentation;
    const bool below_peak = from_oom > 0 && from_oom < peak_reserved;
    const int64_t known = below_peak ? peak_reserved : from_oom;
    // no OOM records the device's memory: the trace's peak reserved bytes, the least the device
    // had, as the workbench's Replay panel offers them (tester63c F6: unlimited here, the peak
    // there, gave two figures for one file; at unlimited a recorded garbage_collection_threshold
    // never collects and the allocator never releases its cache before a retry)
    // (a trace that starts mid-way keeps unlimited: its blocks before the first entry are placed
    // in address order, not as they were, and may need more than the recording held)
    const bool assumed = capacity <= 0 && known <= 0 && peak_reserved > 0 && walk.starts_empty;
    const int64_t cap = capacity > 0 ? capacity : known > 0 ? known : assumed ? peak_reserved : es::kMaxMemoryBytes;
    std::vector<es::AllocatorConfig> settings{es::recorded_config(snap, cap)};
    for (const auto& c : parse_settings(allocators, max_split, gc, cap)) settings.push_back(c);
    es::SnapshotReplay rep = es::replay_snapshot(snap, d, settings, file);
    // each OOM's advice from the rows beside it, not the allocator's untested candidates (tester59 F1)
    es::advise_snapshot_rows(rep.results, &settings.front(), [&](const es::AllocatorConfig& c) {
      return es::replay_snapshot(snap, d, {c}, file).results.front();
    });
    const es::ReplayResult& own = rep.results.front();
    const bool reproduces = own.final_segments == rep.snapshot_segments && own.final_reserved == rep.snapshot_reserved;
    // the verdict the workbench's Replay panel gives too (snap54, tester54 F9): a trace from the
    // process start against its peak, its fragmentation there, its OOM and its dump
    es::RecordedMemory rec;
    if (rep.starts_at_process_start && rep.entries > 0) {
      rec.peak_reserved = peak_reserved;
      rec.fragmentation_at_peak_reserved = frag_at_peak_reserved;
      rec.first_oom_entry = rep.recorded_ooms.empty() ? -1 : rep.recorded_ooms.front();
      rec.dump_segments = rep.snapshot_segments;
      rec.dump_reserved = rep.snapshot_reserved;
      rec.capacity_assumed = assumed;
    }
    const es::ReplayVerdict verdict =
        es::recorded_replay_verdict(own, own.label, rec);
    const std::string cap_text =
        capacity > 0 ? es::format_bytes(cap) + " (--capacity)"
        : below_peak ? fmt::format("{} (the trace's own peak reserved; free + reserved at the recorded OOM is only {}: "
                                   "memory another process held then, or a device_free that is off; the recorded OOM need not recur; "
                                   "--capacity sets another)",
                                   es::format_bytes(cap), es::format_bytes(from_oom))
        : known > 0  ? es::format_bytes(cap) + " (free + reserved at the recorded OOM)"
        : assumed    ? fmt::format("unknown (no OOM in the trace records it; give --capacity): the trace's peak reserved "
                                   "bytes, {}, the least the device had",
                                   es::format_bytes(cap))
                     : "unknown (no OOM in the trace; give --capacity): unlimited";
    if (as_json) {
      json rs = json::array();
      for (size_t i = 0; i < rep.results.size(); ++i) {
        json r = result_json(rep.results[i]);
        r["recorded_settings"] = i == 0;
        rs.push_back(r);
      }
      jdevs.push_back({{"device", d}, {"entries", rep.entries}, {"capacity_bytes", capacity > 0 || known > 0 || assumed ? cap : 0},
                       {"capacity_source", capacity > 0 ? "--capacity" : below_peak ? "peak_reserved"
                                                         : known > 0              ? "recorded_oom"
                                                         : assumed                ? "trace_peak_reserved"
                                                                                  : "unknown"},
                       {"capacity_at_recorded_oom_bytes", from_oom > 0 ? json(from_oom) : json(nullptr)},
                       {"trace_peak_reserved_bytes", peak_reserved},
                       {"memory_trace_start", rep.starts_at_process_start ? "process_start" : "mid_way"},
                       {"initial_blocks", rep.initial_blocks}, {"recorded_ooms", rep.recorded_ooms},
                       {"snapshot_segments", rep.snapshot_segments}, {"snapshot_reserved_bytes", rep.snapshot_reserved},
                       {"recorded_settings_reproduce_the_dump", reproduces},
                       {"recorded_settings_reproduce_the_recording",
                        verdict.text.empty() ? json(nullptr) : json(verdict.reproduces)},
                       {"recorded_settings_verdict", verdict.text.empty() ? json(nullptr) : json(verdict.text)},
                       {"problems", rep.problems}, {"results", rs}});
      continue;
    }
    std::cout << fmt::format("{} device {}: {} trace entries, device capacity {}\n", file, d, rep.entries, cap_text);
    if (!rep.recorded_ooms.empty())
      std::cout << fmt::format("the recorded run ran out of memory at entry {}\n", rep.recorded_ooms.front());
    if (capacity > 0 && capacity < peak_reserved) std::cout << capacity_note(capacity, peak_reserved, own, rep.recorded_ooms);
    std::vector<es::ReplayResult> rows = rep.results;
    rows.front().label += " (recorded)";
    print_table(rows);
    if (!rep.problems.empty()) {
      // the entries `embedscope import` reports as problems; an alloc larger than its block is
      // replayed at the block's size, the figure `stats` uses (snap54, tester54 F4)
      std::cout << fmt::format("\n{} entr{} the dump or their block (import problems, as `embedscope import` "
                               "lists them; an alloc larger than its block is replayed at the block's size, as `stats` "
                               "counts it):\n",
                               rep.problems.size(), rep.problems.size() == 1 ? "y contradicts" : "ies contradict");
      for (size_t i = 0; i < rep.problems.size() && i < 3; ++i) std::cout << "  " << rep.problems[i] << "\n";
      if (rep.problems.size() > 3) std::cout << fmt::format("  ... and {} more\n", rep.problems.size() - 3);
    }
    if (rep.starts_at_process_start && !verdict.text.empty())
      std::cout << fmt::format("\n{}\n\n", verdict.text);
    else if (rep.starts_at_process_start)
      std::cout << "\n";
    else
      std::cout << fmt::format("\nthe trace starts mid-way (a ring buffer dropped its oldest entries): {} blocks live at "
                               "its first entry were allocated first, in address order; their real order and the "
                               "segments they shared are unknown, so the dump's {} segments ({} reserved) are not "
                               "expected to be reproduced (the replay ends with {}, {})\n\n",
                               rep.initial_blocks, rep.snapshot_segments, es::format_bytes(rep.snapshot_reserved),
                               own.final_segments, es::format_bytes(own.final_reserved));
  }
  if (as_json) std::cout << dump(json{{"snapshot", file}, {"devices", jdevs}}) << "\n";
  return 0;
}

int cmd_replay(const std::string& file, const std::string& allocators, int64_t max_split, double gc, int64_t capacity,
               int64_t device, bool as_json) {
  {  // a device or FIFO (/dev/zero) would be read forever; an empty file holds nothing (tester45 F12.4)
    std::error_code ec;
    const auto st = std::filesystem::status(file, ec);
    // a name that is not there or cannot be opened, with the reason (was "cannot open" alone, or
    // std::filesystem's "filesystem error: status: ..." for a symbolic link loop)
    if (ec || !std::filesystem::exists(st))
      throw es::SpecError(fmt::format("{}: cannot open: {}", file,
                                      ec ? ec.message() : std::strerror(ENOENT)));
    if (std::filesystem::is_regular_file(st) && ::access(file.c_str(), R_OK) != 0)
      throw es::SpecError(fmt::format("{}: cannot open: {}", file, std::strerror(errno)));
    if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
      throw es::SpecError(fmt::format("{}: not a regular file ({}): replay-memory reads an allocator trace (JSON) or a "
                                      "PyTorch memory snapshot (.pickle)",
                                      file, std::filesystem::is_directory(st) ? "a directory" : "a device, FIFO or socket"));
    if (!ec && std::filesystem::is_regular_file(st) && std::filesystem::file_size(file, ec) == 0 && !ec)
      throw es::SpecError(fmt::format("{}: the file is empty (not an allocator trace or a memory snapshot)", file));
  }
  if (is_memory_snapshot_file(file)) return cmd_replay_snapshot(file, allocators, max_split, gc, capacity, device, as_json);
  es::MemoryTrace trace;
  try {
    trace = es::load_memory_trace(file);
  } catch (const std::exception& e) {
    // say what the file is where import reads it: a trace to import, or a pickle of an old protocol
    const std::string head = ss::importers::read_head(file, 1 << 16);
    if (head.rfind(std::string("SQLite format 3\0", 16), 0) == 0)  // tester43 F11: it printed json's parse error
      throw es::SpecError(fmt::format("{}: an SQLite database (an embedscope session?), not an allocator trace: "
                                      "replay-memory reads alloc/free action lists (JSON) and PyTorch memory snapshots "
                                      "(.pickle); a session's memory is in `embedscope stats {}` and the workbench's "
                                      "Memory page",
                                      file, file));
    if (const int protocol = ss::pickle::old_pickle_protocol(head); protocol >= 0)
      throw es::SpecError(ss::pickle::old_pickle_message(file, protocol));
    const ss::importers::Importer* imp = nullptr;
    try {
      imp = &ss::importers::detect(file);
    } catch (const ss::importers::ImportError&) {
    }
    if (imp)
      throw es::SpecError(fmt::format("{}: a trace embedscope import reads ({}), not an allocator trace: replay-memory reads alloc/free action "
                                      "lists (JSON) and PyTorch memory snapshots (.pickle); import it with `embedscope "
                                      "import {}` and see its figures with `embedscope stats`",
                                      file, imp->description, file));
    if (dynamic_cast<const es::SpecError*>(&e) != nullptr) throw;  // already names the file and field
    throw es::SpecError(fmt::format("{}: not an allocator trace (JSON) or a PyTorch memory snapshot: {}", file, e.what()));
  }
  const int64_t cap = capacity > 0 ? capacity : trace.capacity_bytes;
  if (cap <= 0) throw es::SpecError(fmt::format("{}: no capacity: give --capacity or \"capacity_bytes\" in the trace", file));
  std::vector<es::ReplayResult> results;
  for (const auto& c : parse_settings(allocators, max_split, gc, cap)) results.push_back(es::replay(trace, c, file));
  es::advise_from_replays(results, "the trace's actions", [&](const es::AllocatorConfig& c) { return es::replay(trace, c, file); });
  if (as_json) {
    json j = json::array();
    for (const auto& r : results) j.push_back(result_json(r));
    std::cout << dump(json{{"trace", file}, {"actions", trace.actions.size()}, {"capacity_bytes", cap}, {"results", j}})
              << "\n";
    return 0;
  }
  std::cout << fmt::format("trace {}: {} actions, device capacity {}\n\n", file, trace.actions.size(), es::format_bytes(cap));
  print_table(results);
  return 0;
}

struct ReplayState {
  std::string file, allocators;
  int64_t max_split = 0, capacity = 0, device = -1;
  double gc = 0;
  bool json = false;
};

}  // namespace

Command add_replay_memory_command(CLI::App& app) {
  auto s = std::make_shared<ReplayState>();
  auto* rep = app.add_subcommand("replay-memory",
                                 "Replay alloc/free actions through allocator settings and compare reserved, peak "
                                 "and fragmentation");
  rep->add_option("trace", s->file, "Trace JSON: {\"capacity_bytes\": N, \"actions\": [{\"action\": "
                                    "\"alloc\"|\"free\"|\"free_requested\"|\"free_completed\", \"id\", \"size\", "
                                    "\"stream\", \"tag\"}]}, or a PyTorch memory snapshot (.pickle, gzip)")
      ->required();
  rep->add_option("--device", s->device, "Snapshots: replay this device only (default: every device)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  rep->add_option("--allocator", s->allocators, "Comma-separated: caching, expandable, direct (default: all)");
  rep->add_option("--max-split-size", s->max_split,
                  "Also replay caching/expandable with this max_split_size (bytes, >= 20 MiB as PyTorch requires)")
      ->transform(bytes_in_range(es::kMinMaxSplitSizeBytes, es::kMaxMemoryBytes,
                                 "20 MiB, PyTorch's rule: at least its caching allocator's 20 MiB large buffer"));
  rep->add_option("--garbage-collection-threshold", s->gc,
                  "Also replay caching with PyTorch's garbage_collection_threshold T (0 < T < 1, a fraction of the "
                  "capacity: whole free segments unused longest are released once reserved passes it)")
      ->check([](const std::string& v) -> std::string {
        try {
          size_t used = 0;
          const double t = std::stod(v, &used);
          if (used == v.size() && t > 0 && t < 1) return "";
        } catch (const std::exception&) {
        }
        return "must be a number > 0 and < 1 (a fraction of the capacity, as PyTorch's PYTORCH_CUDA_ALLOC_CONF takes "
               "it), got \"" + v + "\"";
      });
  rep->add_option("--capacity", s->capacity,
                  "Device capacity in bytes (default: the trace's capacity_bytes; for a snapshot the device's free + "
                  "reserved bytes at its recorded OOM)")
      ->transform(bytes_in_range(1, es::kMaxMemoryBytes, "a device holds at least one byte"));
  rep->add_flag("--json", s->json, "Print the comparison as JSON");
  return {rep, [s] { return cmd_replay(s->file, s->allocators, s->max_split, s->gc, s->capacity, s->device, s->json); },
          [s] { return s->json; }};
}

}  // namespace embedscope::cli
