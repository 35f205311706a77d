#pragma once
// Synthetic training input: one rank's batch for one step, deterministic in
// (spec.seed, iteration, rank), so any sharding and the unsharded reference see the same data.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// Keyed jagged tensor (TorchRec KJT) of one rank's local batch: features are the keys in
/// WorkloadSpec::features order; lengths is F x B (feature-major); values holds the ids of
/// feature 0's bags, then feature 1's, ... ; offsets() is the F*B+1 prefix sum of lengths.
struct KJT {
  int64_t batch_size = 0;
  int num_features = 0;
  std::vector<int64_t> lengths;
  std::vector<int64_t> values;
  std::vector<int64_t> offsets() const;
  /// Offset of feature f's first id in values.
  int64_t feature_offset(int f) const;
};

struct Batch {
  KJT kjt;
  std::vector<float> dense;   ///< batch_size x num_dense_features (empty without a dense part)
  std::vector<float> labels;  ///< batch_size, 0 or 1
  /// Where the batch came from, for error messages ("train.tsv: batch 3 (lines 25-32)");
  /// empty for synthetic input.
  std::string origin;
  /// Malformed lines a file source skipped while reading this batch (malformed_lines skip).
  int64_t skipped_lines = 0;
};

/// Zipf sampler over ranks {0, ..., n-1} with P(k) ~ 1/(k+1)^alpha, by rejection-inversion
/// (W. Hormann, G. Derflinger, "Rejection-inversion to generate variates from monotone
/// discrete distributions", ACM TOMACS 6(3), 1996; as in Apache Commons RNG). O(1) per draw.
class ZipfSampler {
 public:
  ZipfSampler(int64_t n, double alpha);
  int64_t operator()(std::mt19937_64& rng) const;

 private:
  double h(double x) const;
  double h_inv(double x) const;
  int64_t n_;
  double alpha_, h_x1_, h_n_, s_;
};

/// Bijective affine permutation of [0, n): k -> (a k + c) mod n with gcd(a, n) = 1, drawn
/// from `seed`. Spreads a Zipf distribution's hot ranks over the row range.
class RowPermutation {
 public:
  RowPermutation(int64_t n, uint64_t seed);
  int64_t operator()(int64_t k) const;

 private:
  int64_t n_, a_, c_;
};

/// The permutation BatchGenerator spreads feature `feature`'s Zipf ranks with over its table's
/// num_embeddings rows (ids.permute_seed, or one derived from spec.seed and the feature); the
/// identity (n = 1) when the feature's ids are not permuted (permute false).
RowPermutation feature_row_permutation(const WorkloadSpec& spec, int feature, int64_t num_embeddings);

/// splitmix64 finalizer (Steele, Lea, Flood 2014): a 64-bit mixing function.
uint64_t mix64(uint64_t x);

/// Initial value of weight (table, row, col): uniform in [-1/sqrt(n), 1/sqrt(n)) (DLRM's
/// init), a pure function of (seed, table, row, col) so shards initialise independently.
float initial_weight(uint64_t seed, int table, int64_t row, int64_t col, int64_t num_embeddings);
/// Fills a shard (rows x cols, row-major) of `table` starting at (row_offset, col_offset).
void init_shard(uint64_t seed, int table, int64_t num_embeddings, int64_t row_offset, int64_t rows,
                int64_t col_offset, int64_t cols, float* out);

class BatchGenerator {
 public:
  explicit BatchGenerator(const WorkloadSpec& spec);
  /// The local batch of `rank` at `iteration` (0-based, warmup included). Labels come from
  /// a fixed, seeded teacher (hashed per-row scores plus a linear function of the dense
  /// features), so the loss can fall. The teacher keys a row by the index of the table that
  /// serves the feature as the workload wrote it (TableSpec::written_index): a shared_with table
  /// folded into its owner keeps its own labels, so sharing rows has a cost to measure.
  Batch make(int64_t iteration, int rank) const;

 private:
  const WorkloadSpec& spec_;
  std::vector<int> table_of_;              // per feature: its table (FeatureIndex)
  std::vector<uint64_t> teacher_table_;    // per feature: the table index the teacher keys its rows by
  std::vector<ZipfSampler> zipf_;          // per feature (unused for uniform)
  std::vector<RowPermutation> perm_;       // per feature
};

/// Ids outside [0, num_embeddings) under spec.invalid_ids = error. Bad input: exit code 2.
class InvalidIdsError : public SpecError {
 public:
  using SpecError::SpecError;
};

/// Applies the invalid-id policy to a KJT before anything is sent: `error` throws
/// InvalidIdsError naming the feature, how many ids are bad, the valid range and up to 5
/// examples; `clamp` moves them to the nearest valid row; `drop` removes them (shortening
/// their bags). Returns the number of ids clamped or dropped per feature. `origin`
/// (Batch::origin: file, batch, lines) starts the error message when not empty.
std::vector<int64_t> apply_invalid_id_policy(const WorkloadSpec& spec, KJT& kjt, int rank, const std::string& origin = {});

}  // namespace embedscope::engine
