#pragma once
// HTA's GPU-kernel figures and an import's problems as `import` and `stats` print them (text and
// JSON), each figure labelled with its definition.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/did_not_end_ops.h"
#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::cli {

/// A table of the figures per rank, preceded by the definitions; "" when `figures` is empty.
/// `warmup_steps`: the run's warm-up steps (meta warmup_steps), which the note on the GPU events
/// left out names only when there were some; -1: unknown (an import, an older file).
/// `on_export`: the same figures with HTA's whole-us rounding (GpuKernelOptions::whole_us) on an
/// Embedscope session, what HTA computes on its `export --format kineto`; when not empty, a line
/// under the table gives their overlap per rank ("... overlap 4.08% on every rank"; tester51 F11).
std::string gpu_kernels_text(const std::vector<sessions::RankKernelFigures>& figures, bool keep_last_step,
                             int64_t warmup_steps = -1, const std::vector<sessions::RankKernelFigures>& on_export = {});
/// [{"rank", "overlap_pct" (null without communication), "communication": bool, "idle_ns", ...}];
/// with `on_export` (as above) each rank also has "hta_on_export": {"overlap_pct" (null without
/// communication), "gpu_events", "kernel_time_ns"}.
nlohmann::json gpu_kernels_json(const std::vector<sessions::RankKernelFigures>& figures, bool keep_last_step,
                                const std::vector<sessions::RankKernelFigures>& on_export = {});

/// The import problems as a table (severity, count, name, first example); "none" when empty.
std::string import_problems_text(const std::vector<sessions::ImportStat>& stats);
nlohmann::json import_problems_json(const std::vector<sessions::ImportStat>& stats);

/// The events that did not end (sessions/analysis/did_not_end_ops.h): a line with their count
/// and the first `listed` of them (rank, lane, name, start in us, step), each on its own line;
/// "" when `ops` is empty. Example:
///   did not end  3 events, kept as zero-length ops (no time counted; not in the time range)
///     rank 2 lane 1  negative  at 20 us, step 7
std::string did_not_end_text(const std::vector<sessions::DidNotEndOp>& ops, size_t listed = 5);
/// {"count": n, "ops": [{"rank", "lane", "start_ns", "step", "name"}, ...]} with the first
/// `listed` ops.
nlohmann::json did_not_end_json(const std::vector<sessions::DidNotEndOp>& ops, size_t listed = 100);

}  // namespace embedscope::cli
