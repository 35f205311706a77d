#pragma once
// Holistic Trace Analysis' GPU-kernel figures, per rank, on any session with GPU stream lanes
// (imported traces, cuda runs). Definitions as HTA computes them (facebookresearch/
// HolisticTraceAnalysis at f4d0062: hta/analyzers/communication_analysis.py
// get_comm_comp_overlap, hta/analyzers/breakdown_analysis.py get_temporal_breakdown, the filter
// hta/common/trace.py _filter_irrelevant_gpu_kernels, the rounding hta/common/trace_parser.py
// round_down_time_stamps):
//
//   GPU events      every op on a lane of kind "stream" (kernels, memcpy, memset, sync records)
//   classes         importers/common/kernel_classes.h: communication, memory, computation, other
//   warm-up         Embedscope's own sessions (not imported): GPU events of warm-up steps (step
//                   < 0) are left out first, as every other figure of such a session is over the
//                   measured steps (imported traces number their profiler steps from 0)
//   last step       dropped by default: where the session has at least two distinct steps, only
//                   GPU events whose launch (the host op with the same correlation id; for a GPU
//                   event without one, the event itself) starts before the start of the rank's
//                   last step are kept (keep_last_step: launches up to the end of the last step)
//   merged(S)       the union of the intervals of S (HTA merge_kernel_intervals)
//   overlap %       100 * |merged(computation) ∩ merged(communication)| / |merged(communication)|;
//                   memory and other kernels in neither; a rank without communication kernels
//                   has no overlap figure ("no communication"), never NaN
//   kernel time     end of the last GPU event - start of the first (all classes)
//   idle            kernel time - |merged(all GPU events)|
//   compute         |merged(computation)|
//   non-compute     kernel time - compute - idle
//
// Rounding: HTA parses Kineto's float microseconds and rounds every event to [ceil(ts),
// floor(ts + dur)] whole microseconds (float64 arithmetic) before anything else. On imported
// sessions (metadata import_origin_ns present) the figures apply the same rounding to the
// trace's own timestamps, so they equal HTA's to the microsecond; other sessions (Embedscope's
// runs, imported Nsight exports, whose times are integer ns) use exact ns, unless
// GpuKernelOptions::whole_us asks for HTA's rounding (what HTA computes on an Embedscope
// session's `export --format kineto`, which holds the same GPU events: the set-up and warm-up
// left out of both). GPU events join their
// launch by correlation id on every imported session.

#include <cstdint>
#include <vector>

#include "embedscope/sessions/importers/common/kernel_classes.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

struct GpuKernelOptions {
  bool keep_last_step = false;  ///< HTA's include_last_profiler_step
  /// Round every event to whole microseconds as HTA does on reading a Kineto trace, on any
  /// session (imported Kineto traces are always rounded): on an Embedscope session, the figures
  /// HTA computes on its `export --format kineto` (the same events, ns-exact in the file, rounded
  /// by HTA's parser: a simulated 5 us kernel loses up to 2 us). tester51 F11.
  bool whole_us = false;
};

/// One GPU event, as the figures see it (times already rounded where they are).
struct GpuSpan {
  int64_t start = 0, end = 0;  ///< ns (end < start is possible after HTA's rounding of sub-us events)
  importers::KernelClass cls = importers::KernelClass::computation;
  int32_t name_id = -1;  ///< the event's name (SessionReader::name); -1 where not given
};

struct RankKernelFigures {
  int32_t rank = 0;
  int64_t gpu_events = 0;      ///< GPU events counted (after the last-step rule)
  int64_t dropped_events = 0;  ///< GPU events dropped by the last-step rule: the two below together
  /// Of dropped_events, those whose launch starts in the last profiler step or after it (with
  /// keep_last_step: after the last step's end); 0 where the rule does not apply.
  int64_t dropped_last_step = 0;
  /// Of dropped_events, those with no launch (no host op with their correlation id on an imported
  /// trace): HTA's filter joins GPU events to their launch, so these are in no step and left out
  /// whether the last step is kept or not (tester47 F6: counted in the "last step" column).
  int64_t dropped_no_launch = 0;
  /// GPU events of warm-up steps (step < 0) left out before anything else: Embedscope's own
  /// sessions (cuda, simulated), whose other figures cover the measured steps only; 0 for imports
  int64_t warmup_events = 0;
  bool has_comm = false;       ///< false: "no communication" (overlap_pct is then 0 and meaningless)
  int64_t comm_ns = 0;         ///< |merged(communication)|
  int64_t overlap_ns = 0;      ///< |merged(computation) ∩ merged(communication)|
  double overlap_pct = 0;      ///< 100 * overlap_ns / comm_ns
  int64_t kernel_time_ns = 0;  ///< first GPU event start to last end
  int64_t idle_ns = 0, compute_ns = 0, non_compute_ns = 0;
  bool microsecond_rounding = false;  ///< HTA's us rounding applied (imported Kineto traces)
  /// The session has at least two distinct steps, so the last-step rule applied (false: every
  /// GPU event counted, as HTA does for a trace without two profiler steps)
  bool last_step_rule = false;
};

/// HTA's merge: sorted by start, a new interval begins where start > the largest end so far;
/// each merged interval is [min start, max end] of its group. Keeps HTA's arithmetic for
/// negative-length events (they count end - start < 0, as in HTA).
std::vector<GpuSpan> hta_merge(std::vector<GpuSpan> spans);

/// The figures of one rank from its kept GPU events (any order).
RankKernelFigures kernel_figures(const std::vector<GpuSpan>& spans);

/// HTA's rounding of one event given in trace ns: [ceil(ts_us), floor(ts_us + dur_us)] in us,
/// with ts_us and dur_us the float64 values HTA parses, returned in ns (multiples of 1000).
GpuSpan hta_round(int64_t trace_start_ns, int64_t trace_end_ns, importers::KernelClass cls);

/// One rank's GPU events as the figures count them (after the warm-up and last-step rules, rounded
/// where the figures round), with name ids, and the figures' counters of what was left out
/// (gpu_events, the spans' figures and the class fields are not filled: kernel_figures(spans) does).
struct RankGpuEvents {
  RankKernelFigures counters;
  std::vector<GpuSpan> spans;
};
/// The kept GPU events of every rank that has GPU stream lanes, ascending by rank: what
/// gpu_kernel_figures and gpu_kernel_breakdown (kernel_breakdown.h) count. Throws SessionError on
/// an unreadable file.
std::vector<RankGpuEvents> kept_gpu_events(const SessionReader& session, const GpuKernelOptions& options = {});
/// The figures of every rank that has GPU stream lanes, ascending by rank. Throws SessionError
/// on an unreadable file.
std::vector<RankKernelFigures> gpu_kernel_figures(const SessionReader& session, const GpuKernelOptions& options = {});

}  // namespace embedscope::sessions
