#pragma once
// Successive profiling windows of one process. torch.profiler with a schedule that repeats (or a
// loop that outlives its active steps) calls its on_trace_ready once per window, and
// tensorboard_trace_handler writes each window to a file of its own, "{worker}.{stamp}.pt.trace.json":
// one worker name, the wall clock of the writing as the stamp. Without this the files of one
// process were imported as that many ranks, overlaid from t = 0, and the stub window the profiler
// writes when it stops right after a step() began (one ProfilerStep of a few us) became a rank of
// its own whose "step" was the run's shortest (testerB F2).

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "importers/kineto_json/trace_model.h"

namespace embedscope::sessions::importers::kineto {

/// The parts of a file name that tensorboard_trace_handler wrote: "{worker}.{stamp}.pt.trace.json"
/// or "....pt.trace.json.gz". `stamp_ns`: the wall clock of the writing, ns since the Unix epoch
/// (torch 1.x writes int(time.time() * 1000), ms: a stamp below 10^15 is read as ms; torch 2.x
/// time.time_ns()). `ok` false for any other name. Example: "/t/trainer.1796601585049.pt.trace.json"
/// -> dir "/t", worker "trainer", stamp_ns 1796601585049000000.
struct HandlerFileName {
  bool ok = false;
  std::string dir, worker;
  int64_t stamp_ns = 0;
};
HandlerFileName handler_file_name(const std::string& path);

/// A trace whose earliest event is before this (ns on its own clock: 1 hour) and that has no
/// baseTimeNanoseconds counts its ts from its profiler's start (the legacy profiler, ~100 us
/// before the first event), not from an epoch: Kineto's own ts are Unix-epoch us, or relative to
/// baseTimeNanoseconds (nccl_data: 4.5e12 us).
inline constexpr int64_t kProfilerStartClockNs = int64_t{3'600} * 1'000'000'000;

/// Whether `tr`'s clock has an epoch that other processes share: baseTimeNanoseconds, a Kineto
/// trace (schemaVersion: Kineto writes Unix-epoch ts or ts relative to baseTimeNanoseconds), or ts
/// past kProfilerStartClockNs (an absolute clock). So the legacy profiler's traces, and others
/// without schemaVersion whose ts start near 0, have none. A trace with no event counts as having
/// one (there is nothing to place).
bool has_clock_epoch(const RankTrace& tr);

/// Joins the traces of `traces` that are successive windows of one process into one trace, in
/// time order: files of one directory with one worker name (handler_file_name) that all lack
/// distributedInfo.rank, or all claim the same rank. Their times are put on one axis as truthfully
/// as the files allow:
///  - every window has baseTimeNanoseconds: each on its own epoch (ts + its base, as one clock);
///  - every window's ts are absolute (past kProfilerStartClockNs): as recorded;
///  - else (ts from each window's own profiler start): by the stamps in the file names, each
///    window's last event at its file's stamp (the handler writes a window right after it ends, and
///    the next window starts recording after that: to the stamp's ms and the export's own time),
///    a window that would then start before the previous one ended by at most 2 ms (the stamps'
///    rounding) starts where it ended.
/// Windows that overlap on that axis beyond it ran at the same time: processes that share a worker
/// name, not one process; such a group is left as it is (one rank per file, as before). Each join
/// is the info problem `windows_of_one_process` naming the files and how they were placed. The
/// last window of a join that holds one ProfilerStep with no op in it but aten::empty (the handle
/// of record_function, which ProfilerStep#N is) is the stub the profiler writes when it stops
/// right after step() began the next step: that span is left out of the steps (its events kept,
/// in no step), info problem `stub_window`. The joined trace keeps the first window's file as
/// its `file` and every window in `sources`; every cut short window keeps its own problem
/// (truncated): the last one's cut is the joined trace's (`cut`), each earlier one's is in
/// `earlier_window_cuts`, so the step each cut fell in is incomplete (trace_builder.cpp). Other
/// traces are untouched.
void join_process_windows(std::vector<RankTrace>& traces, const Interner& names, ImportProblems& problems);

}  // namespace embedscope::sessions::importers::kineto
