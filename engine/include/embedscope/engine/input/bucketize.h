#pragma once
// Input bucketizing of a KJT (the first half of TorchRec's input dist, FBGEMM's
// block_bucketize_sparse_features): the ids of one rank's batch are split into the slots
// (feature, shard) that the destination ranks look up, row_wise shards keeping only the ids
// of their row range, rebased to the shard's first row. CPU reference of the CUDA
// bucketize_kjt_cuda (cuda_kernels.h); the trainer's input dist uses it.

#include <cstdint>
#include <span>
#include <vector>

namespace embedscope::engine {

/// One output slot of the bucketizing: the ids of `feature`, or with `row_wise` only those in
/// [row_begin, row_begin + num_rows), minus row_begin.
struct BucketSlot {
  int feature = 0;
  bool row_wise = false;
  int64_t row_begin = 0;  ///< row_wise: first row of the shard
  int64_t num_rows = 0;   ///< row_wise: rows of the shard
};

/// The bucketized KJT, slots in the order given.
struct BucketizedKjt {
  std::vector<int64_t> lengths;  ///< slots x batch_size: ids of (slot, bag)
  std::vector<int64_t> ids;      ///< slot-major, then bag, then the input order
  std::vector<int64_t> splits;   ///< per slot: ids sent (sum of its lengths)
};

/// Bucketizes a KJT of `batch_size` bags per feature (values, offsets of features x
/// batch_size + 1 entries, feature-major, as KeyedJaggedTensor.offsets()) into `slots`.
/// Throws std::invalid_argument when a slot's feature is outside the KJT, batch_size < 0,
/// or the offsets do not fit `values`.
BucketizedKjt bucketize_kjt(std::span<const int64_t> values, std::span<const int64_t> offsets,
                            int64_t batch_size, std::span<const BucketSlot> slots);

}  // namespace embedscope::engine
