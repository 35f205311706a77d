#pragma once
// How each table of a run is stored (metadata table_storage_json, FORMAT.md), read once for
// `embedscope stats` and the workbench's Summary (tester42 F11: only the CLI showed it): data
// type, rounding, optimizer state, hashing, low rank, placement, bytes over all ranks, the stored
// rows' error against their fp32 values, hash collisions and the device cache's hit rate.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace embedscope::sessions {

/// One table's storage. Figures a session does not hold (a simulated run's error and collisions,
/// an uncached table's hit rate) are empty optionals, shown as "-".
struct TableStorageRow {
  std::string table;
  std::string data_type = "fp32";     ///< fp32, fp16, int8, int4
  std::string rounding = "-";         ///< "-" for fp32, else "stochastic" or "nearest"
  std::string state = "fp32";         ///< optimizer_state_type
  std::string placement = "device";   ///< device, host, host_cached
  int64_t hash_size = 0;              ///< rows hashed into (0: not hashed)
  int64_t low_rank_dim = 0;           ///< r of a low-rank table (0: full rank)
  int64_t weight_bytes = 0;           ///< summed over ranks
  int64_t optimizer_state_bytes = 0;  ///< summed over ranks
  int64_t master_copy_bytes = 0;      ///< the fp32 master copy stochastic rounding keeps, if any
  std::optional<double> max_abs_error, relative_error;  ///< stored rows vs their fp32 values
  std::optional<double> collisions_per_step;            ///< hash collisions a measured step
  std::optional<double> cache_hit_rate;                 ///< host_cached: hits / (hits + misses), 0..1
};

/// The rows of `table_storage_json` (one per table, in its order); `steps` (measured steps)
/// divides the collisions (taken as 1 when <= 0). Empty for a missing or unreadable text (older
/// files) - never throws.
std::vector<TableStorageRow> table_storage_rows(const std::string& table_storage_json, int64_t steps);

/// Per rank, the hash collisions of that rank's own batches (ids sharing their row with another
/// id of the batch, engine input/hashing.h) summed over the hashed tables and the measured steps:
/// table_storage_json's "hash_collisions_per_rank" (index = rank). An empty vector when no table
/// is hashed (no collisions to count); nullopt when a hashed table does not hold them per rank
/// (files written before they were recorded, simulated runs) or the text is unreadable. Never throws.
std::optional<std::vector<int64_t>> rank_hash_collisions(const std::string& table_storage_json);

/// True when a row is worth a block of its own: a table stored other than fp32 / unhashed /
/// full rank / fp32 state on the device (stats prints the block only then).
bool stored_differently(const TableStorageRow& row);

}  // namespace embedscope::sessions
