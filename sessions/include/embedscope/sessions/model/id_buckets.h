#pragma once
// The row buckets of the session table `id_histogram` (schema 3): how a table of N rows is cut
// into min(kMaxIdBuckets, N) equal buckets. Row r falls in bucket floor(r * buckets / N), so
// bucket b covers rows [ceil(b N / buckets), ceil((b + 1) N / buckets)).
// Example: N = 1000 gives 256 buckets; bucket 1 is rows [4, 8), bucket 255 rows [997, 1000).

#include <cstdint>

namespace embedscope::sessions {

/// The most buckets a table's row range is cut into.
inline constexpr int64_t kMaxIdBuckets = 256;

/// Buckets of a table of `num_rows` rows: min(kMaxIdBuckets, num_rows), and 1 for num_rows <= 1.
constexpr int64_t id_buckets_of(int64_t num_rows) {
  return num_rows < 1 ? 1 : (num_rows > kMaxIdBuckets ? kMaxIdBuckets : num_rows);
}

/// First row of bucket `b` (0 <= b <= id_buckets_of(num_rows); b = buckets gives num_rows):
/// ceil(b * num_rows / buckets), the inverse of id_bucket_of_row. num_rows <= 2^40 keeps the
/// product in range.
constexpr int64_t id_bucket_begin(int64_t num_rows, int64_t b) {
  const int64_t n = id_buckets_of(num_rows);
  return (b * num_rows + n - 1) / n;
}

/// The bucket of row `row` (0 <= row < num_rows): floor(row * buckets / num_rows).
constexpr int64_t id_bucket_of_row(int64_t num_rows, int64_t row) { return row * id_buckets_of(num_rows) / num_rows; }

}  // namespace embedscope::sessions
