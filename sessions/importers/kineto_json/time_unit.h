#pragma once
// Traces whose "ts" / "dur" are nanoseconds, not the Chrome trace format's microseconds (a
// converter or a hand-written trace that wrote its clock's ns): read as us they are 1000x too
// long (a 222 ms ProfilerStep read as 222 s), so they are found by their values and converted.

#include <string>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "importers/kineto_json/trace_model.h"

namespace embedscope::sessions::importers::kineto {

/// What the durations of a parsed trace say of its time unit.
struct TimeUnitEvidence {
  double median_kernel_us = 0;  ///< median "dur" of its kernels as read (us); 0: no kernel
  double median_step_us = 0;    ///< median ProfilerStep span as read (us); 0: no step
  size_t kernels = 0, steps = 0;
  bool declared_ns = false;     ///< the document's "displayTimeUnit" is "ns"
  bool ns = false;              ///< the verdict: ts and dur are nanoseconds
};

/// The rule (tr's events and steps as parsed, times = text value x 1000). Real Kineto traces'
/// kernels are short: median 16.3 us (nccl_data, HTA's tests), 11.0 us (trace_diff_test); a
/// ProfilerStep lasts ms to seconds. Read as us, a ns trace's are 1000x that. ns when:
///  - at least 10 kernels with a median of 1 ms or more and a median step of 60 s or more (no
///    step: a median kernel of 5 ms or more), or
///  - fewer than 10 kernels, and a median step of 1000 s or more.
/// "displayTimeUnit" is not the unit of ts in the Chrome trace format (only how a viewer shows
/// it: Kineto writes "ms", `embedscope export --format chrome` "ns", both with ts in us), so it
/// decides nothing; a trace that says "ns" is named so in the problem. The thresholds are this
/// project's: a real trace of 1 ms median kernels has steps far under a minute. Never throws.
TimeUnitEvidence time_unit_evidence(const RankTrace& tr, bool declared_ns);

/// Applies the rule to `tr` (parsed from `path`): when it says ns, every event's and step's ts
/// and end are divided by 1000 (exact for integer ns) and error problem ts_in_ns says so, with
/// the evidence; when "displayTimeUnit" is "ns" but the values read as us, info problem
/// display_time_unit_ns says they were kept as us.
void apply_time_unit(RankTrace& tr, const std::string& path, bool declared_ns, ImportProblems& problems);

}  // namespace embedscope::sessions::importers::kineto
