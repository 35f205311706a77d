#pragma once
// What bounds a training step: its critical path through the ops of every rank, and how much of
// each collective was exposed or spent waiting for the last rank to arrive.
//
// Dependencies are inferred, because the executors do not record them explicitly:
//   - an op waited for the op of the same rank (any lane) that finished last before it started
//     (the previous op of its lane, or the collective whose result it consumed, or the compute
//     op that produced what a collective sends);
//   - an op that starts while another op of its rank is running, more than 50 us after the
//     last op of the rank ended, was launched from inside the running op (a DDP bucket's
//     all-reduce issued during the backward pass, a queued input dist): the path continues
//     into the running op at that moment;
//   - a collective cannot finish before its last member has joined it: the instance of a
//     collective (process group, sequence number) on every rank finishes after the latest start
//     of the instance on any rank.
// Walking these edges backwards from the op that ends the step last gives the critical path,
// as in Holistic Trace Analysis' critical_path_analysis (facebookresearch/HolisticTraceAnalysis,
// which uses CUDA launch and event edges instead) and the classic longest-path view of a
// program's activity graph. Time between an op and its inferred predecessor that no op covers is
// a `gap` (untraced host work or scheduling).

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// One piece of a step's critical path, [start_ns, end_ns).
struct PathSegment {
  enum class Kind : uint8_t { op, gap };
  Kind kind = Kind::op;
  int32_t rank = 0;
  int32_t lane = 0;        ///< op only
  int32_t name_id = 0;     ///< op only (SessionReader::name)
  OpCategory category = OpCategory::other;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  friend bool operator==(const PathSegment&, const PathSegment&) = default;
};

/// The critical path of one step: segments in time order, tiling [start_ns, end_ns) without
/// overlaps (start_ns = the first op on the path, end_ns = the last op of the step to end).
struct StepCriticalPath {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::vector<PathSegment> segments;
};

/// Key of one instance of a collective on every member: ops of several ranks with equal keys
/// are the same collective. `group` comes from the matching CollectiveRecord ("" when none).
struct CollectiveKey {
  std::string group;
  int32_t name_id = 0;
  uint64_t sequence = 0;
  auto operator<=>(const CollectiveKey&) const = default;
};

/// For every op of `ops`, the collective instance it belongs to: comm ops with a non-zero
/// correlation (the group's sequence number). A CollectiveRecord of the same rank and sequence
/// whose [start, end) lies inside the op gives the group; an op without one takes the group of
/// the other ops of its name and sequence when they name exactly one. Result: key -> indices
/// into `ops`.
std::map<CollectiveKey, std::vector<size_t>> collective_instances(const std::vector<OpRecord>& ops,
                                                                  const std::vector<CollectiveRecord>& collectives);

/// How long after its predecessor ended an op may start and still count as started by it
/// (thread hand-over and wake-up); past that, an op of the rank running across its start is the
/// op it was launched from (ns).
constexpr int64_t kLaunchSlackNs = 50'000;

/// What an op waited for before it could start (or, for a collective, finish), by the rules
/// above: the member of its collective that joined last (when after it), the op of its rank
/// that ended last before it started, or the op of its rank it was launched from.
struct OpWait {
  enum class Kind : uint8_t { nothing, collective_peer, ended_before, launched_from };
  Kind kind = Kind::nothing;
  size_t op = 0;  ///< index into the step's ops (not for `nothing`)
};

/// The inferred dependencies of one step's ops (every rank; ops with end <= start take no part),
/// indexed once: O(n log n) to build, O(log n + lanes) per query. Keeps a reference to `ops`.
class StepDependencies {
 public:
  StepDependencies(const std::vector<OpRecord>& ops, const std::vector<CollectiveRecord>& collectives);
  /// The member of op's collective instance that started last, when that is later than `op`
  /// and before `before_ns`; nullopt otherwise (also for an op that is no collective).
  std::optional<size_t> last_member(size_t op, int64_t before_ns) const;
  /// What `rank` was waiting for at time t: launched_from (an op of the rank running across t,
  /// when nothing ended within kLaunchSlackNs before t), ended_before (the op that ended last at
  /// or before t), or nothing.
  OpWait before(int32_t rank, int64_t t) const;
  /// What op waited for: its collective's last member, else before(op's rank, op's start).
  OpWait wait_of(size_t op) const;

 private:
  const std::vector<OpRecord>& ops_;
  std::map<int32_t, std::vector<size_t>> by_end_;                       // per rank, by (end, start)
  std::map<std::pair<int32_t, int32_t>, std::vector<size_t>> by_start_;  // per (rank, lane), by start
  std::map<CollectiveKey, std::vector<size_t>> instances_;
  std::vector<const std::vector<size_t>*> instance_of_;
};

/// The ops with each lane's nested spans replaced by the pieces of time in which each is the
/// innermost one running (its exclusive time: of the ops open at a moment, the one that started
/// last, the shorter on a tie), adjacent pieces of one op joined: a span that encloses others is
/// there only for its own time between them (aten::linear around aten::addmm). Comm ops are kept
/// whole and end their parents' pieces like any child; ops with end <= start pass as they are.
/// Cost O(n log n). (HTA's critical path attributes a parent's time the same way.)
std::vector<OpRecord> innermost_pieces(const std::vector<OpRecord>& ops);

/// The critical path of one step from its ops on every rank (any order; ops with end <= start
/// are ignored) and the step's collective records (may be empty: then collectives are joined
/// by op name and sequence number). Cost O(n log n) for n ops. An empty `ops` gives an empty path.
StepCriticalPath critical_path(const std::vector<OpRecord>& ops, const std::vector<CollectiveRecord>& collectives,
                               int64_t step = 0);

/// One op name's share of the critical path over the measured steps.
struct CriticalPathEntry {
  int32_t name_id = -1;   ///< -1: the gaps (no op)
  OpCategory category = OpCategory::other;
  int64_t ns = 0;         ///< time on the path, summed over steps
  double share = 0;       ///< ns / total path time
  int32_t top_rank = 0;   ///< the rank contributing most of `ns`
  int64_t steps_bounded = 0;  ///< steps in which this entry had the most time on the path
};

/// Per collective name (summed over ranks and measured steps), from the comm ops:
/// `exposed_ns` = the op's time on which its rank computed nothing (HTA's exposed
/// communication, per op); `wait_ns` = for each rank, the time from its own start of the
/// instance to the latest start of the instance on any rank (waiting for a late peer).
struct CollectiveTimes {
  int32_t name_id = 0;
  int64_t count = 0;       ///< ops (instances x members)
  int64_t bytes = 0;       ///< bytes sent + bytes received (the ops' bytes), summed over ranks
  /// Bytes the ranks sent to their peers (summed over ranks): each op's share of its rank's
  /// CollectiveRecord bytes_sent (the record of the same rank and sequence inside the op, or the
  /// one holding the op: an imported trace's kernel), i.e. op bytes x sent / (sent + received);
  /// an op without a record counts half its bytes. A ring all-reduce of B bytes on n ranks sends
  /// 2 (n-1)/n B per rank (nccl-tests' bus-bandwidth factor): the message size B at n = 2.
  /// The figure `stats`, its --json and the Summary print (tester49 F7), less the collective's
  /// split checks (check_bytes_sent below) where move_split_checks ran (analyze does).
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;  ///< the rest of `bytes`: from their peers, summed over ranks
  int64_t time_ns = 0;
  int64_t exposed_ns = 0;
  int64_t wait_ns = 0;
  /// The collective's split checks ("<name>/split_check", Embedscope's all-gather of the split
  /// sizes, not TorchRec's) that ran inside its ops: how many, and their bytes, which
  /// move_split_checks (split_checks.h) takes out of bytes_sent / bytes_received, so those are
  /// the collective's own (TorchRec's figure) and `bytes` = bytes sent + received + the checks'.
  /// The ops' time, exposed and waiting include the checks' (tester51 F4). Last in the struct:
  /// aggregate initializers of the fields above keep their meaning.
  int64_t check_count = 0;
  int64_t check_bytes_sent = 0, check_bytes_received = 0;
};

struct Interval;  // analysis.h

/// Adds the CollectiveTimes of one step's ops (every rank) to `out`, keyed by name_id.
/// `instances` is collective_instances(ops, collectives); `collectives` the step's records (they
/// split each op's bytes into sent and received; {}: every op counts half its bytes each way).
/// `compute`: per rank, the merged compute time a collective's exposed time is measured against
/// (analysis.h compute_intervals of the ops the step figures see); nullptr: compute_intervals(ops),
/// the same-lane rule without roles (a comm op's own lane computes nothing while it runs).
void add_collective_times(const std::vector<OpRecord>& ops, const std::map<CollectiveKey, std::vector<size_t>>& instances,
                          std::map<int32_t, CollectiveTimes>& out, const std::vector<CollectiveRecord>& collectives = {},
                          const std::map<int32_t, std::vector<Interval>>* compute = nullptr);

}  // namespace embedscope::sessions
