#pragma once
// The hashing trick (TableSpec::hash_size): a table with hash_size rows serves ids drawn over
// [0, num_embeddings); id i is looked up in row xxHash64(i) mod hash_size. Applied to a KJT
// after the invalid-id policy and before bucketizing, by the threaded executor and by the
// unsharded reference, so both see the same rows.

#include <cstdint>
#include <vector>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// The seed of the id hash: XXH64(id, 8, kIdHashSeed), the same for every table and run.
constexpr uint64_t kIdHashSeed = 0;

/// The row of `id` in a table of hash_size rows: XXH64 of the id's 8 bytes in the machine's
/// (little-endian on x86-64) order with seed kIdHashSeed, modulo hash_size. hash_size > 0.
/// Example (tested): hashed_row(0, 10) == XXH64 of eight zero bytes (0x34c96acdcadb1bbb) % 10 == 9.
int64_t hashed_row(int64_t id, int64_t hash_size);

/// Replaces every id of the features served by a hashed table (hash_size > 0) by its row, in
/// place, and returns per table (spec order) the hash collisions of this batch: the distinct
/// ids of the table in the KJT (over all its features) whose row is also the row of another
/// distinct id of the batch. E.g. distinct ids {3, 7, 9} with rows {1, 1, 2}: 2 collisions.
/// Tables without hashing count 0. Cost O(ids log ids).
std::vector<int64_t> apply_hashing(const WorkloadSpec& spec, KJT& kjt);

}  // namespace embedscope::engine
