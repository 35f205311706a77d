// `embedscope replay-memory`: replays a trace of alloc/free actions through allocator settings
// and compares reserved bytes, peaks and fragmentation (text or --json).

#include <algorithm>
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
#include "embedscope/engine/workload/spec.h"
#include "output/output.h"
#include "workload_args.h"  // kInteger

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;

namespace {

int cmd_replay(const std::string& file, const std::string& allocators, int64_t max_split, int64_t capacity,
               bool as_json) {
  const es::MemoryTrace trace = es::load_memory_trace(file);
  const int64_t cap = capacity > 0 ? capacity : trace.capacity_bytes;
  if (cap <= 0) throw es::SpecError(fmt::format("{}: no capacity: give --capacity or \"capacity_bytes\" in the trace", file));
  std::vector<es::AllocatorConfig> settings;
  std::string list = allocators.empty() ? "caching,expandable,direct" : allocators;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    es::AllocatorKind kind;
    try {
      kind = es::allocator_kind_from_string(name, "--allocator");
    } catch (const std::invalid_argument& e) {
      throw es::SpecError(e.what());
    }
    if (kind == es::AllocatorKind::cuda_async)
      throw es::SpecError("--allocator: cuda_async cannot be replayed: its cudaMallocAsync pool needs a GPU and hides its "
                          "layout; replay caching, expandable or direct");
    settings.push_back({kind, cap, 0, false});
    if (kind != es::AllocatorKind::direct && max_split > 0) settings.push_back({kind, cap, max_split, false});
    start = comma + 1;
  }
  std::vector<es::ReplayResult> results;
  for (const auto& c : settings) results.push_back(es::replay(trace, c, file));
  if (as_json) {
    json j = json::array();
    for (const auto& r : results)
      j.push_back({{"allocator", es::to_string(r.config.kind)}, {"max_split_size", r.config.max_split_size},
                   {"oom", r.oom}, {"oom_action", r.oom_action}, {"oom_message", r.oom_message},
                   {"peak_allocated_bytes", r.peak_allocated}, {"peak_reserved_bytes", r.peak_reserved},
                   {"fragmentation_at_peak", r.fragmentation_at_peak}, {"memviz_fragmentation_at_peak", r.memviz_at_peak},
                   {"segments_at_peak", r.segments_at_peak}, {"final_reserved_bytes", r.final_reserved}});
    std::cout << dump(json{{"trace", file}, {"actions", trace.actions.size()}, {"capacity_bytes", cap}, {"results", j}})
              << "\n";
    return 0;
  }
  std::cout << fmt::format("trace {}: {} actions, device capacity {}\n\n", file, trace.actions.size(), es::format_bytes(cap));
  std::cout << fmt::format("{:<36} {:>14} {:>14} {:>14} {:>10} {:>9}  {}\n", "allocator", "peak allocated",
                           "peak reserved", "frag at peak", "memviz", "segments", "result");
  for (const auto& r : results)
    std::cout << fmt::format("{:<36} {:>14} {:>14} {:>13.1f}% {:>10.3f} {:>9}  {}\n", r.label,
                             es::format_bytes(r.peak_allocated), es::format_bytes(r.peak_reserved),
                             100 * r.fragmentation_at_peak, r.memviz_at_peak, r.segments_at_peak,
                             r.oom ? fmt::format("OOM at action {}", r.oom_action) : std::string("ok"));
  for (const auto& r : results)
    if (r.oom) std::cout << fmt::format("\n{}: {}\n", r.label, r.oom_message);
  return 0;
}

struct ReplayState {
  std::string file, allocators;
  int64_t max_split = 0, capacity = 0;
  bool json = false;
};

}  // namespace

Command add_replay_memory_command(CLI::App& app) {
  auto s = std::make_shared<ReplayState>();
  auto* rep = app.add_subcommand("replay-memory",
                                 "Replay alloc/free actions through allocator settings and compare reserved, peak "
                                 "and fragmentation");
  rep->add_option("trace", s->file, "Trace JSON: {\"capacity_bytes\": N, \"actions\": [{\"action\": "
                                    "\"alloc\"|\"free\", \"id\", \"size\", \"stream\", \"tag\"}]}")
      ->required();
  rep->add_option("--allocator", s->allocators, "Comma-separated: caching, expandable, direct (default: all)");
  rep->add_option("--max-split-size", s->max_split,
                  "Also replay caching/expandable with this max_split_size (bytes, >= 20 MiB as PyTorch requires)")
      ->check(kInteger)->check(CLI::Range(es::kMinMaxSplitSizeBytes, es::kMaxMemoryBytes));
  rep->add_option("--capacity", s->capacity, "Device capacity in bytes (default: the trace's capacity_bytes)")
      ->check(kInteger)->check(CLI::Range(int64_t{1}, es::kMaxMemoryBytes));
  rep->add_flag("--json", s->json, "Print the comparison as JSON");
  return {rep, [s] { return cmd_replay(s->file, s->allocators, s->max_split, s->capacity, s->json); },
          [s] { return s->json; }};
}

}  // namespace embedscope::cli
