#pragma once
// A scaling study: one workload on simulated clusters of growing size (exec/simulated), per
// sharding type, with what a class needs to see where table_wise stops scaling and row_wise
// starts paying its all-to-alls: step time, throughput, scaling efficiency, the share of the
// step spent in embedding communication, and memory per GPU. Weak scaling, as DLRM training
// scales: every GPU keeps the workload's batch_size, so the global batch grows with the cluster.
// `embedscope scaling` prints it; the points can be written as simulated sessions.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

struct ScalingStudyOptions {
  std::string hardware;            ///< hardware profile (load_hardware_profile's argument)
  /// cluster sizes, ranks, each in [1, kMaxSimulatedRanks]; run in ascending order, each once;
  /// a size above one node must be whole nodes (SpecError before any point runs)
  std::vector<int> gpus;
  std::vector<ShardingType> shardings;  ///< every table of the workload gets this type
  int gpus_per_node = 0;           ///< node shape; 0: the profile's
  /// When not empty, each point's session is written to session_dir/<sharding>_<gpus>.db; a
  /// file of that name is replaced only with `overwrite` (SpecError naming it before any point runs).
  std::string session_dir;
  bool overwrite = false;
  /// Set (e.g. from a SIGINT / SIGTERM handler) to stop: the point running is cancelled after its
  /// current step (its session stays readable, ended "cancelled") and the points after it are
  /// not run; each is kept with the error "not run (cancelled)". May be null.
  const std::atomic<bool>* cancel = nullptr;
  /// Called after each point (for progress); may be empty.
  std::function<void(const struct ScalingPoint&)> on_point;
};

/// One (sharding type, cluster size) of the study.
struct ScalingPoint {
  ShardingType sharding = ShardingType::table_wise;
  int gpus = 0, nodes = 0;
  /// Why there are no figures ("" when the point ran): the plan does not fit the profile's
  /// device memory (the refusal names the rank and the term; past two ranks, how many more), or
  /// the run did not complete.
  std::string error;
  int64_t step_time_ns = 0;        ///< median over the measured steps of the slowest rank's step
  /// The step time with the profile's assumed figures moved (cost/profile_trust.h
  /// assumption_corner: fast, slow), ns; 0, 0 when not computed (no assumed figure)
  int64_t step_time_low_ns = 0, step_time_high_ns = 0;
  double samples_per_s = 0;        ///< global batch (batch_size x gpus) / step_time
  /// (samples_per_s / gpus) / the study's baseline (scaling_baseline: the best samples/s per GPU
  /// at the smallest size any sharding type ran), one baseline for every type, so equal per-GPU
  /// throughput reads as equal efficiency (tester55 F3: against each type's own first point,
  /// column_wise - which cannot run on 1 GPU - read 96.6% at 8 GPUs and table_wise 45.5% at
  /// per-GPU rates within 0.5%); 1 = the baseline's per-GPU rate.
  double scaling_efficiency = 0;
  /// Time of the embedding collectives (input, output and gradient dists: every comm op but the
  /// dense all-reduce) over the measured step time, mean over ranks, in [0, 1]: the figure
  /// EMBark (Liu et al., RecSys 2024, "Embedding Optimization for Training Large-scale Deep
  /// Learning Recommendation Systems with EMBark") gives as 25% of a DLRM-DCNv2 step on 8 H100s
  /// and 51% on 128.
  double embedding_comm_share = 0;
  double comm_share = 0;           ///< the same for every collective (dense all-reduce too)
  int64_t memory_bytes_per_gpu = 0;  ///< the largest rank's peak (the planner's storage estimate)
  /// Bytes on the wire per step: every rank's bytes sent to other ranks (all collectives, the
  /// dense all-reduce included; RankSummary::bytes_sent, what the point's session records
  /// as its collectives' bytes_sent and `stats` adds up), over the measured steps, divided by them.
  /// E.g. criteo_kaggle-like 26 tables of dim 16, batch 256 a GPU, 8 GPUs table_wise: the pooled
  /// all-to-all alone is (W - 1) x B x T x D x 4 = 7 x 256 x 26 x 16 x 4 = 2,981,888 B of it.
  /// 0 in studies written before it was recorded.
  int64_t wire_bytes_per_step = 0;
  /// Which of plan_search's proposals placed the tables (planner/search.h): "uniform:<type>"
  /// (by estimated time, LPT) or "greedy" (plan_sharding, by bytes) when that was faster.
  std::string placement;
  /// The tables the plan does not give the point's type (name, type it has), in table order.
  /// Empty in studies since fixf49 (a too-short table gets the type with empty shards, below);
  /// kept for the JSON of earlier studies, where the search had kept such tables table_wise.
  std::vector<std::pair<std::string, ShardingType>> other_types;
  /// The tables of the point's type whose row split leaves some of its ranks (row_wise: the
  /// world; table_row_wise, grid_shard: a node's) a shard of no rows, in table order. TorchRec's
  /// split (row_wise_split) gives ranks blocks of ceil(rows / ranks), the next rank the
  /// remainder and the rest none: 10 rows over 8 ranks, 2 each on ranks 0-4 and none on 5-7
  /// (criteo_kaggle row_wise on 8: t_cat_8 3 rows, t_cat_13 27, t_cat_16 10, t_cat_19 4,
  /// t_cat_21 18). A table with fewer rows than those ranks the search would keep table_wise
  /// (planner/search.h, plan42), which adds a pooled all-to-all to the point (tester49 F6:
  /// criteo_kaggle's 3- and 4-row tables under row_wise on 8 H100s, 0.338 ms a step against
  /// 0.280 ms); the point gives it its type as `run --sharding TYPE` does (plan_sharding), so the
  /// point is the type it is labelled.
  std::vector<std::string> empty_shard_tables;
  /// The ranks of the point's plan that hold no embedding rows (ranks_without_rows,
  /// sharding/idle_ranks.h), ascending: table_wise with more GPUs than tables leaves GPUs - tables
  /// of them; they still join every collective. JSON `ranks_without_rows` (absent when none).
  std::vector<int> ranks_without_rows;
  std::string session_path;        ///< the session written, or ""
  /// Its session could not be written (a full disk: the run ended write_failed, or the session
  /// file could not be made); `error` names the file and the reason. The study runs no point after
  /// it (each is "not run (...)"), and `embedscope scaling` exits 1 (tester50 F5).
  bool write_failed = false;
};

/// The point every scaling efficiency of a study is relative to: among the points that ran, those
/// of the smallest GPU count, and of them the one of the most samples/s per GPU (ties: the first
/// in `points` order).
struct ScalingBaseline {
  ShardingType sharding = ShardingType::table_wise;
  int gpus = 0;
  double samples_per_s_per_gpu = 0;  ///< samples/s / gpus of that point
};
/// The baseline of `points` (above); nullopt when no point ran. O(points).
/// Example: table_wise 1 GPU 100 samples/s, column_wise 1 GPU refused, column_wise 2 GPUs 180
/// samples/s: table_wise at 1 GPU, 100 per GPU (column_wise at 2 GPUs then reads 90%).
std::optional<ScalingBaseline> scaling_baseline(const std::vector<ScalingPoint>& points);

/// The cluster sizes of a study (the DLRM one here and the LM one, exec/lm_scaling_study.h):
/// `gpus` ascending, each once (scaling efficiency is relative to the smallest). `per_node` is the
/// node's GPU count the sizes are checked against. Throws SpecError for an empty list, a size
/// outside [1, kMaxSimulatedRanks], or a size above one node that is not whole nodes.
std::vector<int> scaling_study_sizes(const std::vector<int>& gpus, int per_node);

/// Runs the study: for each sharding type, each cluster size in `options.gpus` order, the
/// workload with devices.count = gpus, sharding.local_world_size = min(gpus, gpus per node),
/// every table of that type (per-table overrides dropped) placed by plan_search restricted to
/// that type (PlanSearchOptions::sharding_types, as TorchRec's planner with a sharding_types
/// constraint: the shorter estimated critical path of the time-balanced and the bytes-greedy
/// placement; a table with fewer rows than the ranks a row split needs split into empty shards
/// as plan_sharding splits it; ScalingPoint::empty_shard_tables names every table of the type
/// with an empty shard), on the simulated backend of the
/// profile (its device memory). O(points x ranks x ops). Throws SpecError for an unknown
/// profile, an empty or out-of-range gpus list, no sharding types, or a workload the parser
/// rejects for a reason other than memory; a point that does not fit or fails is kept with its
/// error and the study goes on. The smallest size is run for every type first (and the next
/// size, for every type, while none ran), so that the baseline is known before a point that
/// ran is handed to on_point (a point with an error is handed out as soon as the points before
/// it were: a refused 1-GPU point prints while the next size runs); points are returned and
/// handed out in type-major order, each with its scaling_efficiency against that baseline.
std::vector<ScalingPoint> run_scaling_study(const WorkloadSpec& spec, const ScalingStudyOptions& options);

/// A study as `embedscope scaling --json` writes it and the workbench opens it.
struct ScalingStudy {
  std::string workload;            ///< the workload's name
  std::string hardware;            ///< the profile's name
  int gpus_per_node = 0;
  int64_t batch_size_per_gpu = 0;  ///< samples per GPU per step
  int64_t steps = 0;               ///< measured steps per point
  std::vector<ScalingPoint> points;
  /// How far to trust its times (cost/profile_trust.h profile_trust_json's "note": the
  /// calibrated profile's error band, the assumed figures); "" for none
  std::string profile_note = {};
};

/// {"workload", "hardware", "simulated": true, "gpus_per_node", "batch_size_per_gpu", "steps",
///  "profile_note" (optional: ScalingStudy::profile_note), "efficiency_baseline": {"sharding", "gpus", "samples_per_s_per_gpu"} or null (scaling_baseline;
///  dumped after "batch_size_per_gpu", the key a study is recognised by),
///  "points": [{"sharding", "gpus", "nodes", "error"} or {"sharding", "gpus", "nodes",
///  "step_time_ns", "samples_per_s", "samples_per_s_per_gpu", "scaling_efficiency",
///  "embedding_comm_share", "comm_share", "memory_bytes_per_gpu", "step_time_range_ns": [low, high]
///  (optional: with assumed figures moved, ScalingPoint::step_time_low_ns), "wire_bytes_per_step" (optional
///  when read: absent in studies written before it, read as 0), "session"?}]}
nlohmann::json to_json(const ScalingStudy& study);
/// The inverse of to_json. Throws SpecError "<origin>: <JSON pointer>: <reason>" for a missing
/// or mistyped key, an unknown sharding type, or a point with gpus outside [1, kMaxSimulatedRanks];
/// for an lm_embedding study ("model": "lm_embedding", exec/lm_scaling_study.h) "<origin>: /model:
/// an lm_embedding scaling study ..., not a DLRM one: read it with lm_scaling_study_from_json".
ScalingStudy scaling_study_from_json(const nlohmann::json& j, const std::string& origin);

}  // namespace embedscope::engine
