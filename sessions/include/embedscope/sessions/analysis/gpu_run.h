#pragma once
// What a GPU run's figures say beyond its streams' (tester38 #2, #7; ux41 #6): how busy the GPU
// streams were and what bounds the step, the host threads' exposed communication beside the
// streams', and what the GPU trace lost. `embedscope stats`, the workbench's Summary page and
// the Compare view (its table and --report) all read them from here, so they cannot disagree.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// How busy a GPU run's streams were over its measured steps (RankStats::gpu_busy_pct), over the
/// ranks with a measured window (RankStats::window_ns > 0).
struct GpuBusyFigures {
  int ranks = 0;                ///< ranks with a measured window (>= 1)
  double mean_pct = 0;          ///< mean of their gpu_busy_pct (%)
  int32_t least_rank = 0;       ///< the first rank with the lowest gpu_busy_pct
  double least_pct = 0;
  int32_t most_rank = 0;        ///< the first rank with the highest gpu_busy_pct
  double most_pct = 0;
  /// Mean over those ranks of RankStats::host_exposed_comm_ns (ns, all measured steps summed):
  /// the time the rank's host threads waited in collectives (thread level).
  int64_t host_exposed_comm_ns = 0;
};

/// The GPU busy figures of `st`, or none when no rank has GPU streams (RunStats::stream_ranks
/// false: a cpu run, a simulation) or no rank has a measured window. Never throws.
std::optional<GpuBusyFigures> gpu_busy_figures(const RunStats& st);

/// What bounds the step at `busy_pct` % GPU busy: "host-bound: ..." below 50, "partly
/// host-bound: ..." below 90, "GPU-bound: ..." from 90 on.
std::string gpu_bound_verdict(double busy_pct);

/// The `GPU busy` line and, for an engine run (not `imported`) with measured steps, the `host`
/// line, as `embedscope stats` prints them (label padded to 13 characters, each ending in '\n'):
///   "GPU busy     30.0% of the measured steps, mean over ranks (a kernel or copy running on the
///    rank's streams; least rank 0 20.0%, most rank 1 40.0%): host-bound: ..."
///   "host         the ranks' threads waited in collectives 0.30 ms per rank (0.30 ms per step): ..."
/// "" when gpu_busy_figures(st) has none. A trace without steps (RunStats::whole_trace): "% of the whole trace (no profiler
/// steps)" for "% of the measured steps". Durations as format_ms writes them. With `trace_cut` (trace_cut_text non-empty)
/// the verdict reads "no verdict on what bounds the step: the trace was cut short (trace cut, below)": GPU events after the cut are lost, not idle (tester48 F7).
std::string gpu_busy_text(const RunStats& st, bool imported, bool trace_cut = false);

/// For an imported session whose trace was cut short (import problem `truncated` or
/// `gzip_cut_short`, data_loss): "trace cut    FILE was cut short (import problem truncated,
/// data_loss): its events after the cut are missing, not idle; GPU busy, overlap and exposed
/// communication count only the GPU work written before the cut\n" (FILE: the problem's source).
/// With `gpu_events_survived` false (no GPU stream event survived the cut: RunStats has no
/// stream ranks, the overlap and exposed communication are the host threads') the line says so
/// instead: "trace cut    FILE was cut short (...) and no GPU event survived the cut: overlap and
/// exposed communication fell back to host-thread level ..." (tester49 F1: a 3 MB prefix of a
/// DDP trace read "overlap 100.0%" with no caveat); a trace that never had GPU events (no rank
/// names a device: a CPU trace) says "... its events after the cut are missing, not idle; the
/// figures count only the host-thread events written before the cut (a CPU trace: it had no GPU
/// events)" instead. "" otherwise (an engine run, an intact
/// trace), whatever the flag. Reads the import_stats table.
/// When the cut fell inside the last surviving step (import problem `last_step_cut`, kineto
/// trace_builder.cpp: that step kept without a window, and the events after its end kept as the
/// next step, whose span the cut lost, without one either), a second line follows: "trace cut
/// rank 0: the cut fell inside ProfilerStep#5 on its thread: its events after the cut are lost,
/// so step 5 is incomplete and out of the step figures (its N events kept); ProfilerStep#6's span
/// was lost with it: ..." (the problem's example; " (and K more ranks)" when several ranks).
std::string trace_cut_text(const SessionReader& session, bool gpu_events_survived = true);

/// How busy one GPU was as a whole where several ranks share it (ux41 #11: four ranks on one H200
/// each read their own share; the device was ~16% busy). Per measured step the GPU's window is
/// [earliest start, latest end] of its ranks' step windows; busy is the union of every kernel
/// and copy on its ranks' GPU streams (lanes of kind "stream") within it.
struct DeviceGpuBusy {
  std::string device;          ///< "NVIDIA H200 (cuda:0)" (rank_gpus)
  std::vector<int32_t> ranks;  ///< ascending
  int64_t window_ns = 0;       ///< the GPU's windows, summed over the measured steps
  int64_t busy_ns = 0;         ///< of them, time in which any of its ranks' streams ran something
  double busy_pct = 0;         ///< 100 * busy_ns / window_ns (0 without a window)
};

/// One entry per GPU of the session (rank_gpus' order), shared or not; {} for a session without
/// GPUs or a simulation. Reads the stream lanes' ops once. Throws SessionError on an unreadable file.
std::vector<DeviceGpuBusy> device_gpu_busy(const SessionReader& session, const RunStats& st);

/// "GPU busy     per GPU: NVIDIA H200 (cuda:0) 16.2% (ranks 0-3 together: ...)\n" for every GPU
/// that two ranks or more share (one line each); "" when no GPU is shared.
std::string device_gpu_busy_text(const std::vector<DeviceGpuBusy>& devices);

/// What the GPU trace lost, from the CUPTI counters in the metadata (cupti_dropped_records,
/// cupti_launches_dropped, cupti_device_rank_fallbacks; the last only where ranks share a GPU):
/// one "GPU trace    ..." line each ('\n'-terminated); "" when nothing was lost or the session
/// has no GPU trace. Missing or unreadable counters read 0.
std::string gpu_trace_loss_text(const SessionReader& session);

/// All of a GPU run's lines, in the order `stats` prints them: gpu_busy_text (imported: meta
/// imported = 1), trace_cut_text (right under the GPU busy line, whose verdict it withholds;
/// printed whenever the trace was cut, also when no GPU event survived and there is no GPU busy
/// line), device_gpu_busy_text, gpu_trace_loss_text. "" for a cpu run or a simulation.
/// `stats`, `compare`, the Summary page and the Compare view print this. Reads the stream lanes'
/// ops (device_gpu_busy): call it off the GUI thread. Throws SessionError on an unreadable file.
std::string gpu_run_text(const SessionReader& session, const RunStats& st);

}  // namespace embedscope::sessions
