#pragma once
// Analyses of a session, shared by `embedscope stats` and the workbench.
//
// Time classes per rank (Holistic Trace Analysis, "comm/comp overlap"): *compute* is every
// op that is not communication or a copy (categories input, lookup, dense, optimizer, other);
// *communication* is category comm. On one lane (a host thread, a stream) an op's time inside a
// comm op or a wait of the same lane is not compute: a blocking collective's caller waits in it,
// so the spans enclosing it (autograd's AccumulateGrad around c10d::allreduce_) compute only
// outside it. An imported trace's record_function ranges (OpRoles::annotation_ids) and waits
// (OpRoles::wait_id) are neither compute nor comm. The intervals of each class are merged per
// rank first (partially overlapping ops count once), then
//   overlap          = |compute ∩ comm|
//   exposed comm     = |comm| - overlap
//   idle             = |step window| - |compute ∪ comm ∪ memcpy|
//   overlap %        = 100 * overlap / |comm|
// Source: facebookresearch/HolisticTraceAnalysis, comm_comp_overlap (time computing while
// communicating / time communicating), which counts GPU kernels; the same-lane rule is what a
// kernel stream has by construction (no kernel runs inside another on its stream) and a host
// thread needs (tester's hand figures: a blocking c10d::allreduce_ read as 100 % hidden).

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <optional>
#include <vector>

#include "embedscope/sessions/analysis/counted_steps.h"
#include "embedscope/sessions/analysis/critical_path.h"
#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"
#include "embedscope/sessions/analysis/stats.h"
#include "embedscope/sessions/analysis/stragglers.h"

namespace embedscope::sessions {

/// Half-open [start, end) in ns.
struct Interval {
  int64_t start = 0;
  int64_t end = 0;
  friend bool operator==(const Interval&, const Interval&) = default;
};

/// The union of `v` as sorted, disjoint, non-empty intervals (touching ones are joined).
std::vector<Interval> merge_intervals(std::vector<Interval> v);
/// Total length of merged intervals.
int64_t covered_ns(const std::vector<Interval>& merged);
/// Intersection of two merged interval lists (merged result).
std::vector<Interval> intersect(const std::vector<Interval>& a, const std::vector<Interval>& b);

/// One rank's time in one step (ns); by_category is the union length per category.
struct RankStepTimes {
  int64_t step = 0;
  int32_t rank = 0;
  int64_t window_ns = 0;
  int64_t compute_ns = 0;
  int64_t comm_ns = 0;
  int64_t overlap_ns = 0;
  int64_t exposed_comm_ns = 0;
  int64_t idle_ns = 0;
  std::array<int64_t, kNumCategories> by_category_ns{};
  /// A pipeline drain step (RunStats::drain_steps): recorded and listed, but in none of the
  /// time figures (step times, the ranks' compute / comm / overlap / exposed communication, the
  /// critical-path totals, the per-collective times)
  bool drain = false;
};

/// What the step figures make of some ops beyond their category (an imported trace's; empty for
/// a run's session).
struct OpRoles {
  /// Name ids of record_function ranges (Kineto cat `user_annotation`, meta
  /// import_annotation_names_json): they enclose a phase's ops, so they are neither compute nor
  /// comm nor busy time (a thread waiting out an all-to-all inside `pooled_a2a` is not computing),
  /// unless their name gives them a category (is_plain_annotation).
  std::set<int32_t> annotation_ids;
  /// Name id of the Work::wait spans (model/wait_span.h), -1 none: no comm and no compute, but,
  /// like a comm op, their time is taken out of the compute ops of their lane that enclose them.
  int32_t wait_id = -1;
};

/// An op of one of `annotation_ids` (OpRoles) whose category is `other`: a range the step
/// figures and the critical path leave out. A range whose name gives it a category counts as
/// that category's work (torch.optim's "Optimizer.step#SGD.step": optimizer; a comm-named one:
/// comm, as a CPU trace's gloo:* spans).
bool is_plain_annotation(const OpRecord& o, const std::set<int32_t>& annotation_ids);

/// The compute time of `ops` per rank (merged intervals, ns), by the rule above: per lane, the
/// compute ops (category not comm / memcpy, no annotation, no wait) less the time of the lane's
/// own comm ops and waits; then the union over the rank's lanes. No clipping. Cost O(n log n).
std::map<int32_t, std::vector<Interval>> compute_intervals(const std::vector<OpRecord>& ops, const OpRoles& roles = {});

/// Times of one rank in one step window [t0, t1) from its ops (any lanes; clipped to the window),
/// by the rule above: compute and by_category_ns of the compute categories count an op's time
/// outside its lane's comm ops and waits; annotations and waits count in no class and no
/// category.
RankStepTimes rank_step_times(const std::vector<OpRecord>& ops, int64_t t0, int64_t t1, const OpRoles& roles = {});

struct RankStats {
  int32_t rank = 0;
  int64_t compute_ns = 0, comm_ns = 0, overlap_ns = 0, exposed_comm_ns = 0, idle_ns = 0;
  double overlap_pct = 0;
  int64_t ids_looked_up = 0;
  int64_t lookup_ns = 0;
  int64_t bytes_sent = 0, bytes_received = 0;
  std::array<int64_t, kNumCategories> by_category_ns{};
  int64_t peak_allocated_bytes = 0;  ///< device memory (memory_counters; 0 in version-1 files)
  int64_t peak_reserved_bytes = 0;
  double fragmentation = 0;          ///< largest external fragmentation at a step end
  /// The lowest MemoryViz measure (MemoryCounter::memviz_fragmentation: 1 = the free memory in
  /// one piece, lower = scattered, so the lowest is the worst; tester52 F8: the largest was shown as
  /// the worst) at a step end with free memory in the segments (reserved > allocated; with nothing
  /// free the measure is 0 though nothing is fragmented); none without such a step end.
  std::optional<double> memviz_fragmentation;
  /// Sum of the rank's measured step windows (ns): compute, comm and idle are parts of it.
  int64_t window_ns = 0;
  /// A rank with GPU streams of an engine run (RunStats::stream_ranks, not imported): its host
  /// threads' comm and exposed comm (thread level, the figures a cpu run's rank has), beside the
  /// streams' above: the time the rank's threads waited in collectives. 0 otherwise.
  int64_t host_comm_ns = 0, host_exposed_comm_ns = 0;
  /// Percent of window_ns in which the rank's GPU streams ran a kernel or a copy (100 - idle
  /// share; stream ranks only, else 0). Low: the host's work between GPU ops bounds the step.
  double gpu_busy_pct = 0;
};

/// One op name's exclusive ("self") time: its ops' time outside the ops they enclose on their
/// lane (critical_path.h innermost_pieces; a comm op whole), summed over ranks.
struct OpSelfTime {
  int32_t name_id = 0;
  OpCategory category = OpCategory::other;
  int64_t self_ns = 0;
  int64_t count = 0;  ///< ops of the name
};

/// Self time per op name of `ops` (any ranks and lanes), most first; plain annotations
/// (is_plain_annotation) and waits (roles.wait_id) left out. Ties: lower name id first.
std::vector<OpSelfTime> op_self_times(const std::vector<OpRecord>& ops, const OpRoles& roles);

/// The figures of `embedscope stats`, over the measured steps (step >= 0).
struct RunStats {
  /// How the session ended (SessionReader::status()); an imported session's is its import's
  /// ("complete").
  std::string ended;
  /// An import of an Embedscope export that said how its run ended (recorded_run.h, tester53 F3):
  /// that run's end ("complete", "crashed", ...), its end message ("" none) and its planned
  /// measured steps (0 unknown); the drain steps are counted as that run's. "" / 0 otherwise.
  std::string exported_run_ended, exported_run_end_message;
  int64_t exported_run_planned_steps = 0;
  bool simulated = false;
  /// Some rank has GPU stream lanes (an imported trace, a cuda run; not a simulation): its
  /// compute / comm / overlap / exposed / idle figures are those of its streams' ops (kernels,
  /// copies), not of its host threads' spans; a cpu run's ranks have only host threads
  bool stream_ranks = false;
  int64_t steps = 0;
  int64_t samples_per_step = 0;
  Distribution step_time_ns;       ///< per step: the slowest rank's step time (drain steps left out)
  /// The values of step_time_ns in step order (the counted steps' times, ns): the series whose
  /// autocorrelation the batch-means standard error of the mean step accounts for (noise.h
  /// batch_means). Empty where step_time_ns is.
  std::vector<int64_t> step_series_ns;
  /// The counted step whose time is step_time_ns.max (its slowest rank's own window, end -
  /// start, the longest; the lowest such step on a tie): the step `stats` calls slowest, which the
  /// workbench's report fits (tester54 F7: it took the widest window across ranks, min start to
  /// max end, another step where the ranks' windows are offset). None without a counted step.
  std::optional<int64_t> slowest_step;
  double samples_per_s = 0;        ///< samples_per_step over step_time_ns.mean
  /// The pipeline (workload_json "pipeline"; "" when the session has none) and how many of the
  /// `steps` measured steps drain it (stats.h: pipeline_drain_steps; tester46 F21): the last
  /// ones, recorded and listed in per_step (RankStepTimes::drain) and critical_paths, but left
  /// out of every time figure: step_time_ns, samples_per_s, the ranks' compute / comm / overlap /
  /// exposed communication / idle, overlap_pct, critical_path and critical_path_ns, collectives.
  /// The counts (the ranks' ids looked up, lookup time, bytes sent and received) leave them out
  /// too (tester48 F4: the warm-up holds the pipeline's extra lookups and dists, the drain steps
  /// miss them). all_drain: every measured step drains it, so all are counted.
  /// Only the drain steps the run reached count as such (counted_steps.h drain_steps_run): a
  /// complete run's last ones; a run cancelled, killed, crashed or stopped before its planned
  /// last steps drained nothing, and its last steps are ordinary steps (retest49 R2).
  std::string pipeline;
  int64_t drain_steps = 0;
  bool all_drain = false;
  /// The measured steps the time figures cover, steps - drain_steps: what a "per step" time
  /// figure (exposed communication, the time by category, the critical path, the collectives'
  /// counts, bytes and times) is divided by (retest47 R5: they were divided by `steps`).
  int64_t counted_steps() const { return steps - drain_steps; }
  /// An imported trace without profiler steps (no ProfilerStep#N: torch.profiler used without a
  /// schedule, export_chrome_trace): its figures are over the whole trace, one window per rank
  /// from its first op's start to its last op's end, held as step 0 of per_step and
  /// critical_paths; `steps` stays 0 (no step time, throughput or loss) and top_ops is filled.
  bool whole_trace = false;
  /// whole_trace of a trace whose ProfilerStep#N spans the cut left incomplete (import problems
  /// last_step_cut, cut_lost_gpu_events, kineto incomplete_steps.h): it had steps, none complete.
  bool whole_trace_cut = false;
  /// whole_trace only: what the figures over the whole trace stand in for, as the texts say it:
  /// "no complete profiler step: the trace was cut" (whole_trace_cut), else "no profiler steps".
  std::string no_step_reason() const {
    return whole_trace_cut ? "no complete profiler step: the trace was cut" : "no profiler steps";
  }
  /// whole_trace: op_self_times of the whole trace (empty otherwise).
  std::vector<OpSelfTime> top_ops;
  double overlap_pct = 0;          ///< over all ranks and steps
  int64_t exposed_comm_ns = 0;     ///< mean over ranks of each rank's total exposed communication
  /// ids looked up per rank over the whole run (the counted steps' totals): max / mean (1 =
  /// balanced). A run whose heaviest rank changed (a live rebalance) can read balanced here while
  /// every step was not: lookups_max_over_mean_per_step is the figure a straggler costs.
  double lookups_max_over_mean = 1;
  /// The mean over the counted steps (those that looked something up; through common_last_step
  /// where the ranks hold different steps) of each step's max / mean of the ranks' ids looked up;
  /// the totals' figure when no step has load counters. Example: a step of [1024, 512, 512, 512]
  /// (1.60) then one of [512, 1024, 512, 512] (1.60): 1.60 a step, where the totals [1536, 1536,
  /// 1024, 1024] give 1536 / 1280 = 1.20.
  double lookups_max_over_mean_per_step = 1;
  /// Lookup time per rank (load_counters.lookup_ns): max / mean; nullopt when no rank recorded
  /// any (every lookup_ns 0: lm_embedding sessions before tester47 F16, sessions without load
  /// counters) - "not recorded", never a balanced 1.
  std::optional<double> lookup_time_max_over_mean;
  /// The session's world size (metadata world_size). Engine sessions: every rank is in
  /// `ranks`. Imported traces and rank-per-process sessions (metadata process_rank, one
  /// process's own session): ranks without a lane in the session are not in `ranks` (no zeros
  /// for them in means and tables) but in `untraced_ranks`.
  int32_t world_size = 0;
  std::vector<RankStats> ranks;          ///< rank order
  std::vector<int32_t> untraced_ranks;   ///< the world's ranks not in this session; rank order
  std::vector<RankStepTimes> per_step;   ///< (step, rank) order
  /// per measured step; empty for a simulated session (nothing trained) and an imported one (metadata
  /// imported "1": a trace records no loss; its steps.loss 0.0 is not read)
  std::vector<double> loss;
  /// ROC AUC of the trained model on held-out generated batches (metadata held_out_json "auc",
  /// engine model/held_out.h); none when the run was not evaluated or one class was absent.
  std::optional<double> held_out_auc;
  /// The session has memory counters (a run, a memory snapshot): the peaks below are measured;
  /// false for a Kineto / Nsight trace, whose 0 peaks mean "not recorded", not 0 bytes.
  bool has_memory = false;
  /// The session has load counters (ids looked up per table shard: a run); false for an import,
  /// whose imbalance figures are then not measured.
  bool has_load = false;
  int64_t peak_allocated_bytes = 0;      ///< the largest over ranks
  int64_t peak_reserved_bytes = 0;
  std::vector<StepCriticalPath> critical_paths;  ///< per measured step (critical_path.h)
  std::vector<CriticalPathEntry> critical_path;  ///< by op name over all steps, most time first
  int64_t critical_path_ns = 0;                  ///< total length of the steps' critical paths
  std::vector<CollectiveTimes> collectives;      ///< per collective name, most exposed first
  /// Per rank (rank order), its waits for its peers in the collectives of the counted steps and
  /// how often it arrived last (stragglers.h; the same ops and instances as `collectives`: their
  /// waited_ns sum to the collectives' wait_ns). Empty without collectives.
  std::vector<RankPeerWait> peer_waits;
  /// One rank's measured steps (rank_step_counts; counted_steps.h).
  using RankStepCount = sessions::RankStepCount;
  /// Set only where the ranks of a run hold different measured steps (a merged launch whose
  /// rank was killed: the killed process lost its last uncommitted steps, its peers went on a
  /// little; tester49 F14): every traced rank's steps, rank order, and the last step every rank
  /// holds (common_last_step). lookups_max_over_mean and lookup_time_max_over_mean are then over
  /// the steps through common_last_step (the same steps for every rank), while each rank's own
  /// figures (RankStats) sum the steps it holds, and per-step figures divide by counted_steps().
  /// The rule is counted_steps.h held_steps, which `rebalance`'s window follows (retest49 R1).
  std::vector<RankStepCount> rank_step_counts;
  int64_t common_last_step = -1;
};

/// One line saying that the ranks hold different steps and which steps each figure uses
/// ("steps        the ranks hold different steps ...: rank 1 200 steps (through step 199); ranks 0, 2
/// 201 steps ...\n", `stats`' line), "" when RunStats::rank_step_counts is empty (tester49 F14):
/// "steps" and unequal_rank_steps_note.
std::string unequal_rank_steps_text(const RunStats& st);
/// unequal_rank_steps_text's sentence alone, without its "steps" column or the newline ("the
/// ranks hold different steps ..."; the workbench's Summary, tester53 F10), "" as there.
std::string unequal_rank_steps_note(const RunStats& st);

/// Computes RunStats from a session. Throws SessionError on an unreadable file.
RunStats analyze(const SessionReader& session);

/// analyze's step-time figures only, from the session's step rows and metadata (no op,
/// collective or counter is read: one query of the steps table, linear in the step rows): ended,
/// held_out_auc, simulated, samples_per_step, steps, pipeline, drain_steps, all_drain,
/// step_time_ns (each step's slowest rank, the drain steps left out), samples_per_s and loss,
/// each as analyze gives it; every other field is left at its default. For what needs only the
/// step time (`launch`'s line under its table: a 26,000-step merged session of 2 ranks was fully
/// analysed, ops and critical paths included, for two figures). Throws as analyze.
RunStats analyze_step_times(const SessionReader& session);

/// What RunStats' overlap, exposed communication and per-rank compute / comm figures measure,
/// for people: "thread level: host spans of compute vs comm ops, clipped to step windows" (cpu runs; a trace
/// without steps, RunStats::whole_trace: "..., over the whole trace (no profiler steps)", or "(no complete profiler
/// step: the trace was cut)" where the cut left none, RunStats::whole_trace_cut), "stream level: ..." when
/// some rank has GPU streams (RunStats::stream_ranks), "simulated streams: ..." for a simulation. Compute: all but comm, memcpy.
std::string overlap_definition(const RunStats& st);

/// Ranks (ascending) as people read them: runs of 3 or more consecutive ranks as "first-last",
/// e.g. {1, 2, 3, 5, 7, 8} -> "1-3, 5, 7, 8", {1, ..., 1999999} -> "1-1999999" (a trace of one rank
/// of a large job listed every other rank: a 129 KB line, a workbench stuck for minutes; tester37).
std::string rank_list(const std::vector<int32_t>& ranks);

/// Whether an imported session's collective bytes are unknown, so that a 0 reads "unknown"
/// (text) / null (JSON), not 0 B: the import found collectives without arguments (import problem
/// collective_args_not_captured: a Kineto trace without record_param_comms args, every Nsight
/// export), or no collective record of the session carries a byte (a torch profiler trace of
/// Gloo's gloo:* / c10d::* calls, which record no size). False for a run's session.
bool collective_bytes_unknown(const SessionReader& session);

/// max / mean of non-negative values; 1 when the mean is 0 or there are no values.
double max_over_mean(const std::vector<double>& v);

}  // namespace embedscope::sessions
