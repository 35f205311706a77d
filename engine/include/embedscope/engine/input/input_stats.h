#pragma once
// What a workload's input looks like, per feature, before any sharding: the figures
// `embedscope inspect-input` prints (ids per bag, distinct ids, skew, out-of-range ids), counted
// over the batches of a run from whichever source spec.input names.

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/input/source.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// The figures of one feature over the batches counted.
struct FeatureInputStats {
  std::string feature, table;
  int64_t num_embeddings = 0;  ///< rows of the feature's table
  int64_t bags = 0;            ///< bags counted (samples x batches)
  int64_t ids = 0;             ///< ids counted, in range or not
  double ids_per_bag_mean = 0;
  /// Nearest-rank 99th percentile of the bag lengths: the smallest L such that at least 99% of
  /// the bags hold <= L ids.
  int64_t ids_per_bag_p99 = 0;
  int64_t ids_per_bag_max = 0;
  int64_t distinct_ids = 0;    ///< distinct in-range rows looked up
  /// Share of the in-range lookups that fall on the hottest ceil(1% x num_embeddings) rows of the
  /// table (at least one row), and the hottest ceil(10% x num_embeddings); 0 without lookups.
  double top1_share = 0, top10_share = 0;
  int64_t hot_rows_1 = 0, hot_rows_10 = 0;  ///< those row counts
  int64_t out_of_range = 0;    ///< ids outside [0, num_embeddings) (before the invalid_ids policy)
  /// A hashed table (TableSpec::hash_size > 0; all 0 otherwise): the rows it stores, and what
  /// the in-range ids become once hashed as a run hashes them (input/hashing.h: row =
  /// XXH64(id) mod hash_size): the distinct stored rows looked up, the share of the lookups on
  /// the hottest ceil(1% / 10% x hash_size) stored rows (at least one), and the table's hash
  /// collisions (apply_hashing: the distinct ids of a batch sharing their row with another
  /// distinct id of it, over all the table's features) summed over the batches counted, and that
  /// a batch. A run's collisions a measured step are this per-batch figure x devices.count.
  int64_t hash_size = 0;
  int64_t distinct_stored_rows = 0;
  double stored_top1_share = 0, stored_top10_share = 0;
  int64_t stored_hot_rows_1 = 0, stored_hot_rows_10 = 0;
  int64_t collisions = 0;
  double collisions_per_batch = 0;
};

/// Accumulates batches (in WorkloadSpec::features order) and reports FeatureInputStats.
/// Memory: one counter per distinct row per feature (and per distinct stored row of a hashed
/// one), and per distinct bag length; a hashed workload copies each batch once to hash it.
class InputStats {
 public:
  explicit InputStats(const WorkloadSpec& spec);
  /// Counts every bag and id of `kjt`. Throws std::invalid_argument when the KJT's feature count
  /// is not the spec's.
  void add(const KJT& kjt);
  /// The figures so far, one per feature. O(distinct rows x log) per feature.
  std::vector<FeatureInputStats> result() const;

 private:
  std::vector<FeatureInputStats> base_;                         // names and table sizes
  std::vector<std::unordered_map<int64_t, int64_t>> row_count_; // per feature: row -> lookups
  std::vector<std::unordered_map<int64_t, int64_t>> length_count_;  // per feature: bag length -> bags
  std::vector<int64_t> out_of_range_;
  std::vector<std::unordered_map<int64_t, int64_t>> stored_count_;  // hashed features: stored row -> lookups
  std::optional<WorkloadSpec> hashing_;       // the spec, where a table is hashed (apply_hashing)
  std::vector<int64_t> table_collisions_;     // per table, summed over the batches
  int64_t batches_ = 0;
};

/// What `embedscope inspect-input` counts: the input of every batch a run of `spec` trains on.
struct InputInspection {
  std::vector<FeatureInputStats> features;  ///< one per feature, in WorkloadSpec::features order
  int64_t batches = 0;                      ///< the batches counted: (warmup_steps + steps) x devices.count, or max_batches
  int64_t run_batches = 0;                  ///< (warmup_steps + steps) x devices.count, the run's
  int64_t samples = 0;                      ///< batches x batch_size
  int64_t skipped_lines = 0;                ///< malformed file lines skipped (malformed_lines: skip)
  int64_t warmup_batches_left_out = 0;      ///< batches of the warm-up steps read but not counted (measured_only)
};

/// Reads (or generates) the batches of a run of `spec` - every iteration of the warm-up and the
/// measured steps, for every rank, from spec.input's source - and counts them with InputStats,
/// without training. Throws what the source throws for bad or missing files (the message names
/// the file and line). `max_batches` > 0 counts only the first that many (iteration by iteration,
/// every rank's batch of an iteration in turn): a sample of a large run (a simulated 1,024-rank
/// cluster regenerates its whole input otherwise).
/// `measured_only`: the warm-up steps' batches are read (a file source reads in order) but not
/// counted (warmup_batches_left_out), so the figures cover the window of the session's measured
/// steps, as its load counters and row histogram do; run_batches is then steps x devices.count
/// and `max_batches` counts measured batches (tester41 #24).
/// A synthetic source's warm-up batches are not generated at all (the generator makes any
/// (iteration, rank) batch on its own, so skipping them changes nothing counted): a simulated
/// 512-rank run of mlperf_dlrm_dcnv2 generated its 1,024 warm-up batches, 1.8G ids, before
/// the first counted one (tester46 F16).
InputInspection inspect_input(const WorkloadSpec& spec, int64_t max_batches = -1, bool measured_only = false);

/// inspect_input over `source` (which must be make_batch_source(spec)'s kind: spec.input.kind
/// says whether its batches may be made out of order), for tests that count the source's calls.
InputInspection inspect_batches(const WorkloadSpec& spec, BatchSource& source, int64_t max_batches = -1,
                                bool measured_only = false);

}  // namespace embedscope::engine
