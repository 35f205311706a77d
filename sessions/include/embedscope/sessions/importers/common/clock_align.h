#pragma once
// One rank's records between an importer (or merge) and the SessionWriter, and putting the
// ranks' clocks on one axis from their collectives (`--align collectives`).
//
// Ranks' clocks differ (hosts, one CUPTI clock per process). The members of one collective
// (same process group, operation and sequence number) finish together: a ring or tree collective cannot
// end on one rank before the last rank's data arrived, so their ends are the same moment up to
// the completion latency. The offset of rank r is the median, over the collectives r shares with
// an already aligned rank a, of end_r - (end_a - offset_a), starting from the lowest rank
// (offset 0) and repeating until no rank can be added; the median ignores the few collectives
// whose ends are late on one rank. Aligned time = recorded time - offset. The residual skew of a
// collective is max - min of its members' aligned ends.
//
// Example: rank 1 runs 400 us ahead, its all-reduce ends are rank 0's + 400 us + {0, 2, -1, 3,
// -2} us: offset 400 us, residual skews {0, 2, 1, 3, 2} us: max 3 us, median 2 us.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions::importers {

/// Everything a session holds of one rank, in session ns.
struct RankRecords {
  int32_t rank = 0;
  std::string file;                        ///< where it came from (messages)
  RankInfo info;
  std::vector<LaneInfo> lanes;
  std::vector<StepMetric> steps;
  std::vector<OpEvent> ops;                ///< names must outlive the writing
  std::vector<CollectiveRecord> collectives;
};

/// Adds `delta_ns` to every time of `r` (ops, steps, collectives).
void shift_rank(RankRecords& r, int64_t delta_ns);

/// Writes `r` (rank, lanes, steps, collectives, ops in batches) and widens [lo, hi] to its ops,
/// leaving out ops that did not end (model/did_not_end.h): the time range is the valid events'.
void write_rank(const RankRecords& r, SessionWriter& w, int64_t& lo, int64_t& hi);

struct ClockAlignment {
  int32_t reference_rank = 0;
  std::map<int32_t, int64_t> offset_ns;  ///< every rank: its clock minus the reference's (aligned = recorded - offset)
  std::vector<int32_t> unaligned;        ///< ranks sharing no collective with an aligned rank (offset 0)
  std::map<int32_t, int64_t> matches;    ///< per rank: collectives its offset was estimated from
  int64_t matched_collectives = 0;       ///< (group, op, sequence) with members on two or more ranks
  int64_t max_skew_ns = 0, median_skew_ns = 0;  ///< residual skew over those, after alignment
};

/// The offsets of `ranks` from the ends of their collectives (`collectives` of RankRecords;
/// group, op and sequence match them). Ranks without collectives in common keep offset 0 and are
/// listed in `unaligned`. Cost O(n log n) in collective records.
ClockAlignment align_by_collectives(const std::vector<RankRecords>& ranks);

/// align_by_collectives, then every rank shifted by -offset and all of them re-based so that
/// time 0 is the earliest aligned event, floored to whole microseconds (`origin_ns`, the trace ts
/// of session time 0, moves with the re-base, so raw trace ts = origin_ns + t + offset). Ranks left unaligned are
/// counted in `problems` as `unaligned_rank` (error).
ClockAlignment align_ranks(std::vector<RankRecords>& ranks, int64_t& origin_ns, ImportProblems& problems);

/// The metadata value import_align_json: {"method": "collectives", "reference_rank",
/// "offsets_ns": {"1": 400000, ...}, "matches": {...}, "matched_collectives", "max_skew_ns",
/// "median_skew_ns", "unaligned_ranks": [...]}.
std::string alignment_json(const ClockAlignment& a);

/// Lines for `import` to print: each rank's offset and the residual skew.
std::string alignment_text(const ClockAlignment& a);

/// For ranks left on their recorded clocks (align "none": each process's or trace's own wall
/// clock): counts the problem clock_disagreement (error; the times are kept) once for each rank
/// whose collectives end, by their median (align_by_collectives), more than 2 ms apart from the
/// reference rank's, naming its file, the offset, how many collectives it is the median of, and
/// `--align collectives` as the remedy. 2 ms: processes of one machine whose clocks agreed ended
/// their collectives 0.1-1 ms apart (tester36); one whose clock anchor was read across a
/// preemption, 7.5 ms.
void check_wall_clock_agreement(const std::vector<RankRecords>& ranks, ImportProblems& problems);

/// The time range of one rank on its recorded clock, ns: its first step or ended op's start to
/// its last one's end (ops that did not end, model/did_not_end.h, left out). `empty` when the
/// rank has neither.
struct RankSpan {
  int32_t rank = 0;
  std::string file;  ///< where the rank came from (messages)
  int64_t start_ns = 0, end_ns = 0;
  bool empty = true;
};

/// rank_span of `r`: rank, file and the range of its steps and ended ops.
RankSpan rank_span(const RankRecords& r);

/// For ranks left on their recorded clocks (align "none"): the ranks of one job run at the same
/// time, so a rank whose time range does not overlap the reference rank's (the lowest rank with
/// events) was recorded by another run, or its clock is off by more than the whole trace
/// (tester37 #15: a 2024 rank 0 beside a rank 1 whose ts start at 0, 51 days apart). Counts the
/// problem disjoint_time_ranges (error; the times are kept) once per such rank, naming both
/// files, both ranges (s on the recorded clock) and the gap. `aligned`: the spans are those after
/// `align_ranks` (--align collectives; ranks that share no collective keep their clocks, tester45
/// F13: two jobs 19,184 days apart were imported as one): the message says "on the clocks aligned
/// by collectives" and disjoint_refusal does not suggest --align collectives again.
void check_time_ranges_overlap(const std::vector<RankSpan>& spans, ImportProblems& problems, bool aligned = false);

/// The refusal of an import or merge whose ranks' time ranges do not overlap (the problem
/// disjoint_time_ranges among `problems`: traces of different jobs, tester42 F12), "" when there
/// is none. `embedscope import`, `embedscope merge` and the workbench's import say the same:
/// "<file>: refused: <the problem's example> (and N more such ranks). Import each job's traces on
/// their own; if they are the ranks of one job whose clocks disagree, use --align collectives, or
/// <anyway>", where `anyway` says how the caller's user goes on regardless, e.g. "--allow-disjoint
/// to import them as one session anyway".
std::string disjoint_refusal(const std::vector<ImportStat>& problems, const std::string& anyway);

}  // namespace embedscope::sessions::importers
