#pragma once
// The GPU kernel breakdown of Holistic Trace Analysis' get_gpu_kernel_breakdown
// (facebookresearch/HolisticTraceAnalysis, hta/analyzers/breakdown_analysis.py:
// _aggr_gpu_kernel_time groups a rank's GPU events by name and aggregates their `dur` as sum,
// max, min, mean; each kernel's type is hta/utils/utils.py get_kernel_type, the classes of
// importers/common/kernel_classes.h). Over the GPU events HTA's other figures count
// (gpu_kernels.h kept_gpu_events: the last profiler step dropped unless kept, whole-us rounding
// on imported Kineto traces, warm-up steps of Embedscope's runs left out), summed over ranks.
// Where HTA aggregates the kernels past its num_kernels (10) as "others" and gives its type
// percentages of merged time split into overlap combinations, this keeps every kernel and gives
// each kernel's and each type's share of the summed durations of all GPU events (the shares of
// the kernels sum to 1, their totals to `total_ns`).

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// One kernel name's GPU events, over every rank (durations in ns, after HTA's rounding where it
/// applies: end - start of the rounded event, which can be < 0 for a sub-us event, as in HTA).
struct KernelBreakdownRow {
  int32_t name_id = -1;  ///< SessionReader::name
  importers::KernelClass cls = importers::KernelClass::computation;  ///< HTA's kernel type
  int64_t count = 0;
  int64_t total_ns = 0;  ///< summed durations
  int64_t min_ns = 0, max_ns = 0;
  double mean_ns = 0;    ///< total_ns / count
  double share = 0;      ///< total_ns / KernelBreakdown::total_ns (0 when that is 0)
};

/// One HTA kernel type's GPU events: count, summed durations and their share of all.
struct KernelTypeRow {
  importers::KernelClass cls = importers::KernelClass::computation;
  int64_t count = 0;
  int64_t total_ns = 0;
  double share = 0;
};

struct KernelBreakdown {
  int64_t total_ns = 0;  ///< summed durations of every kept GPU event (all types)
  int64_t events = 0;
  std::vector<KernelTypeRow> types;       ///< types with events, most total time first
  std::vector<KernelBreakdownRow> kernels;  ///< every name, most total time first (lower name id on a tie)
  bool microsecond_rounding = false;      ///< HTA's whole-us rounding applied
};

/// The breakdown of `spans` (any ranks; their name_id set). Pure: what gpu_kernel_breakdown
/// computes from kept_gpu_events. E.g. spans of durations 200, 300 (name 1) and 100 (name 2):
/// name 1 count 2, total 500, min 200, max 300, mean 250, share 500 / 600.
KernelBreakdown kernel_breakdown(const std::vector<GpuSpan>& spans);

/// The breakdown of the session's GPU events (empty, total 0, without GPU stream lanes). Throws
/// SessionError on an unreadable file.
KernelBreakdown gpu_kernel_breakdown(const SessionReader& session, const GpuKernelOptions& options = {});

}  // namespace embedscope::sessions
