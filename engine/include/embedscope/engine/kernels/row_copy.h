#pragma once
// Batched row copies of the tables in host memory (TableSpec::placement host / host_cached,
// model/host_cache.h): one call moves every row a batch needs in one direction, instead of one
// copy per row. The CPU reference of copy_rows_cuda (kernels/cuda_row_copy.h), and what the
// host stand-in of the cuda backend (TrainerOptions::emulate_device) runs.
//
// Source: FBGEMM's UVM caching (fbgemm_gpu split_table_batched_embeddings, EmbeddingLocation
// MANAGED_CACHING): the forward reads each row from its cache slot when lxu_cache_locations
// has one, else straight from the UVM (host, mapped) weights; lxu_cache_populate copies the
// missed rows from UVM into their slots in one kernel and lxu_cache_flush writes the evicted
// dirty rows back the same way. An index with a `_alt` base reproduces that choice per row.

#include <cstdint>

namespace embedscope::engine {

/// For i in [0, n): row d of dst <- row s of src, `dim` floats each, where
///   s = src_rows ? src_rows[i] : i; s >= 0 names row s of `src`, s < 0 row (-1 - s) of
///   `src_alt` (a second base: e.g. the cache slots and the host rows);
///   d = dst_rows ? dst_rows[i] : i; likewise with `dst` / `dst_alt`.
/// A bit copy (no arithmetic). The destination rows must be distinct and must not be source
/// rows of the same call (the rows are copied in any order on a GPU). n == 0 or dim == 0 copies
/// nothing. Throws std::invalid_argument for n or dim < 0, or for a negative index with a null
/// `_alt` base (naming i and the index).
void copy_rows(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows, float* dst,
               float* dst_alt, const int64_t* dst_rows);

}  // namespace embedscope::engine
