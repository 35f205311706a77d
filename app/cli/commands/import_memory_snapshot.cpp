// `embedscope import x.pickle [-o S.db]` for PyTorch CUDA memory snapshots
// (torch.cuda.memory._dump_snapshot; gzip-compressed too): one rank per device, the trace, the
// segment map at the dump, the allocator settings and the counters over time
// (sessions/importers/torch_memory_snapshot/import.h).
//
// import_memory_snapshot() is what `import` (commands/import.cpp) calls once content detection
// says the file is a snapshot (is_memory_snapshot_file: a pickle starts 0x80 + protocol 2..5,
// as it is or gunzipped).

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"
#include "output/gpu_kernels_text.h"
#include "output/output.h"
#include "staged_output.h"
#include "cancel_writes.h"

namespace embedscope::cli {

namespace ss = embedscope::sessions;
namespace ts = embedscope::sessions::torch_snapshot;
using nlohmann::json;

bool is_memory_snapshot_file(const std::string& path) {
  return ss::pickle::is_pickle(ss::importers::read_head(path, 2));  // gunzipped when gzip
}

std::vector<ss::ImportStat> import_memory_snapshot(const std::vector<std::string>& files, const std::string& out, bool overwrite, bool as_json,
                           const std::map<std::string, std::string>& directory_of) {
  const std::string& file = files.front();
  std::string target = out;
  if (target.empty()) {
    std::string stem = std::filesystem::path(file).filename().string();
    for (const char* ext : {".gz", ".pickle", ".pkl"})
      if (stem.size() > std::string(ext).size() && stem.substr(stem.size() - std::string(ext).size()) == ext)
        stem.resize(stem.size() - std::string(ext).size());
    target = stem + ".db";
  }
  refuse_output_among_inputs(target, files, files);
  // Ctrl-C / SIGTERM cancel at once, the staged session removed (cancel_writes.h)
  CancelWrites cancel("import", target, "kept", as_json, "\ncancelling the import\n");
  std::vector<ts::MemorySnapshotFile> snaps;  // read before the session exists: bad input leaves nothing
  snaps.reserve(files.size());
  for (const auto& f : files) snaps.push_back(ss::importers::load_rank_snapshot(f, directory_of));
  std::vector<ts::SnapshotInput> inputs;
  for (size_t k = 0; k < files.size(); ++k) inputs.push_back({&snaps[k], files[k]});
  // written beside `target` and renamed over it once complete (staged_output.h)
  StagedSession staged(target, overwrite);
  cancel.remove_on_cancel(staged.temp());
  ts::ImportSummary sum;
  {
    std::optional<ss::SessionWriter> w;
    cancel.hold([&] { with_out_name(staged, [&] { w.emplace(staged.temp(), true); }); });
    sum = ts::import_torch_memory_snapshots(inputs, *w);
    w->close("complete");
  }
  cancel.commit([&] { staged.commit(); });
  if (as_json) {
    std::cout << dump(json{{"session", target},
                           {"format", "torch_memory_snapshot"},
                           {"devices", sum.devices},
                           {"segments", sum.segments},
                           {"blocks", sum.blocks},
                           {"trace_entries", sum.trace_entries},
                           {"frames", sum.frames},
                           {"stacks", sum.stacks},
                           {"memory_trace_start", sum.trace_entries == 0 ? "not_recorded" : sum.starts_at_process_start ? "process_start" : "mid_way"},
                           {"problems", import_problems_json(sum.import_stats)},
                           {"problem_entries", sum.problems}})
              << "\n";
    return sum.import_stats;
  }
  int64_t reserved = 0;
  for (const auto& snap : snaps)
    for (const auto& s : snap.segments) reserved += s.total_size;
  if (files.size() == 1)
    std::cout << fmt::format("{}: PyTorch memory snapshot, {} device(s), {} segments ({} reserved), {} blocks, {} trace "
                             "entries, {} distinct frames\n",
                             file, sum.devices, sum.segments, ss::format_bytes(reserved), sum.blocks, sum.trace_entries,
                             sum.frames);
  else {
    std::cout << fmt::format("{} PyTorch memory snapshots as {} ranks, {} segments ({} reserved), {} blocks, {} trace "
                             "entries, {} distinct frames\n",
                             files.size(), sum.devices, sum.segments, ss::format_bytes(reserved), sum.blocks,
                             sum.trace_entries, sum.frames);
    const ss::SessionReader session(target);
    for (const auto& r : session.ranks()) std::cout << fmt::format("  rank {}: {}\n", r.rank, r.device);
  }
  if (sum.trace_entries == 0)  // tester37 #8: not a ring buffer that dropped entries
    std::cout << "no trace entries: memory history was not recorded (call torch.cuda.memory._record_memory_history() "
                 "before the workload, then _dump_snapshot()); the segments at the dump are imported\n";
  else if (!sum.starts_at_process_start)
    std::cout << "the trace starts mid-way (a ring buffer dropped its oldest entries): the layout at its first entry is "
                 "walked back from the dump; blocks allocated before it have no stack or time\n";
  if (!sum.import_stats.empty()) {  // stored in import_stats as well: `stats` lists them
    std::cout << "import problems\n" << import_problems_text(sum.import_stats);
    for (size_t i = 0; i < sum.problems.size() && i < 10; ++i) std::cout << "problem: " << sum.problems[i] << "\n";
    if (sum.problems.size() > 10) std::cout << fmt::format("... and {} more problems\n", sum.problems.size() - 10);
  }
  std::cout << fmt::format("session written: {}\n", target);
  return sum.import_stats;
}

}  // namespace embedscope::cli
