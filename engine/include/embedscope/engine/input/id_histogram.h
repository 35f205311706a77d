#pragma once
// How the ids of each table fall over its row range: a histogram over equal row buckets, counted
// by a rank from its own input batches over the measured steps, so the load view can show hot
// rows against the shard boundaries (session table id_histogram, sessions/schema/FORMAT.md).
// The bucket arithmetic is the session model's (embedscope/sessions/model/id_buckets.h); this
// is the accumulator.

#include <cstdint>
#include <vector>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/model/id_buckets.h"

namespace embedscope::engine {

class IdHistogram {
 public:
  static constexpr int64_t kMaxBuckets = sessions::kMaxIdBuckets;
  /// Buckets of a table of `num_rows` rows: min(kMaxBuckets, num_rows) (sessions::id_buckets_of).
  static int64_t buckets_of(int64_t num_rows) { return sessions::id_buckets_of(num_rows); }
  /// First row of bucket `b` (0 <= b <= buckets_of(num_rows); b = buckets gives num_rows):
  /// ceil(b * num_rows / buckets), the inverse of bucket(row) = floor(row * buckets / num_rows)
  /// (sessions::id_bucket_begin).
  static int64_t bucket_begin(int64_t num_rows, int64_t b) { return sessions::id_bucket_begin(num_rows, b); }

  explicit IdHistogram(const WorkloadSpec& spec);
  /// Counts every id of `kjt` (features in spec.features order, as the input generator makes
  /// them) in its table's bucket. Ids outside [0, num_embeddings) are not counted (the
  /// invalid-id policy has already dealt with them). Throws std::invalid_argument when the
  /// KJT's feature count differs from the spec's.
  void add(const WorkloadSpec& spec, const KJT& kjt);
  /// Ids counted in bucket `b` of table `table` so far.
  int64_t count(int table, int64_t b) const { return counts_[static_cast<size_t>(table)][static_cast<size_t>(b)]; }
  /// Adds `more`'s counts (a histogram of the same spec) to these and returns the buckets whose
  /// count changed, as session records of `rank` holding the new totals (what a run writes
  /// after each step: SessionWriter::add_step_records). Throws std::invalid_argument when the
  /// two histograms' tables or buckets differ.
  std::vector<sessions::IdHistogramBucket> add_changed(const IdHistogram& more, int32_t rank);
  /// The histogram of the same tables with every count 0.
  IdHistogram zeroed() const;
  /// The non-empty buckets as session records of `rank`.
  std::vector<sessions::IdHistogramBucket> buckets(int32_t rank) const;

 private:
  std::vector<int64_t> rows_;                 // per table
  std::vector<int> table_of_feature_;         // per feature, -1 when no table serves it
  std::vector<std::vector<int64_t>> counts_;  // per table, per bucket
};

}  // namespace embedscope::engine
