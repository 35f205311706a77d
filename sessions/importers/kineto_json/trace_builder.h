#pragma once
// From parsed rank traces to session records: lane numbers, steps, launch joins, categories,
// collective records (written through a SessionWriter by kineto_json.cpp, after aligning the
// ranks' clocks where asked).

#include <vector>

#include "embedscope/sessions/importers/common/clock_align.h"
#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/importers/importer.h"
#include "importers/kineto_json/trace_model.h"

namespace embedscope::sessions::importers::kineto {

/// The trace ts (ns) of session time 0: the earliest event or step of any rank, rounded down to
/// a whole microsecond (so HTA's microsecond rounding of session times stays exact); 0 when
/// there are no events.
int64_t session_origin_ns(const std::vector<RankTrace>& ranks);

/// Puts `rank`'s ProfilerStep spans in time order and checks them (tester37 #17): a step number
/// repeating the step right before it, the span starting at or after that one's end, is the next
/// step, and every later step is numbered one higher (torch 1.13 with schedule(wait=0) writes
/// ProfilerStep#0 twice: #0, #0, #1 -> steps 0, 1, 2; info problem repeated_step_number); any
/// other step number seen again is the problem duplicate_step (data_loss; the earliest span of the
/// number is kept, the others dropped, so their events belong to the step whose span holds them
/// or to none); a
/// span that starts before an earlier one ends is overlapping_steps (error; both kept as
/// recorded, so the overlap counts in both steps' times). Each names the file, both spans (trace
/// ts in us) and how many more there were.
void check_steps(RankTrace& rank, ImportProblems& problems);

/// The GPU a rank's trace ran its kernels, copies and memsets on: the lowest device id (a stream
/// lane's pid) that deviceProperties names, its name and totalGlobalMem (bytes, 0 absent); id -1
/// when the trace has no stream lane on a device that deviceProperties lists.
struct RankDevice {
  int64_t id = -1;
  std::string name;
  int64_t memory_bytes = 0;
};
RankDevice rank_device(const RankTrace& rank);

/// The session records of one rank (ranks already unique), times shifted by `origin_ns`; adds
/// the rank and its event counts to the summary. Problems met here (partially overlapping spans,
/// too many lanes, kernels that start before their launch, the step a cut fell in: last_step_cut,
/// collectives without arguments: collective_args_not_captured, collectives_by_order) go to
/// `problems`.
RankRecords build_rank(const RankTrace& rank, const Interner& names, int64_t origin_ns, ImportProblems& problems,
                       ImportSummary& summary);

}  // namespace embedscope::sessions::importers::kineto
