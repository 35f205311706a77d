#pragma once
// Tables of `embedscope stats` kept out of stats.cpp: the critical path cut to its top ops, the
// ranks' waits for their peers with the straggler, and the GPU kernel breakdown (text; --json
// keeps every row).

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/kernel_breakdown.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::cli {

/// A line per table whose workload asked for hot rows automatically (workload_json's
/// sharding.tables.NAME.hot_rows {"auto": true, "sample_steps": N}) where none was chosen
/// (table_storage_json's hot_rows 0 or absent): "hot rows     t0: none chosen (no row had more than
/// W x (dim + 1) = 4 x 17 = 68 ids a step in the first 2 iterations; the rows of the table are
/// all sharded)". "" otherwise, and for unreadable or older metadata. `world`: the run's ranks.
std::string hot_rows_none_text(const std::string& workload_json, const std::string& table_storage_json, int64_t world);

/// The table storage block (metadata table_storage_json, FORMAT.md) when a table is stored in
/// reduced precision, keeps reduced-precision optimizer state ("state"), is low-rank or hashed:
/// bytes over all ranks, the stored rows' error against their fp32 values, hash collisions per
/// measured step (`steps`), and for hashed tables a line of them per rank where the session holds
/// them (sessions::rank_hash_collisions). "" for fp32 tables without hashing, older files and
/// unreadable metadata.
std::string table_storage_text(const std::string& table_storage_json, int64_t steps);

/// `stats --top`'s default: rows of the critical path and of the kernel breakdown shown.
constexpr int64_t kStatsTopRows = 10;

/// The critical path's rows, most time first: the first `top` (every row when `top` <= 0 or
/// there are no more), then "  ... and K more (share S%)" with the share of the path the rows not
/// shown hold (e.g. 244 rows, top 10: "... and 234 more (share 3.1%)"). `shown`: an op's name as
/// the table prints it (name_id -1: the gaps), `w` the name column's width.
std::string critical_path_rows_text(const sessions::RunStats& st, const std::function<std::string(int32_t)>& shown,
                                    size_t w, int64_t top);

/// The `imbalance` line's text for a session without load counters (an imported trace): the
/// load is not measured, and where ranks shared collectives the straggler line says who held the
/// others up. E.g. "not measured: a trace has no load counters (the ids each rank looked up); the
/// ranks' waits for each other: straggler below".
std::string no_load_imbalance_text(const sessions::RunStats& st);

/// The `straggler` line (with its column and newline) and, where ranks shared collectives, the
/// table of every rank's waits (per counted step `steps`): collectives on two ranks or more,
/// times it arrived last, time it waited for its peers and time its peers waited for it; "" when
/// no collective ran on two ranks (sessions::straggler_text).
std::string straggler_line(const sessions::RunStats& st, int64_t steps);
std::string peer_waits_text(const sessions::RunStats& st, int64_t steps);
/// {"ranks": [{"rank", "collectives", "last_arrivals", "waited_ns", "caused_wait_ns"}] (sums over
/// the counted steps), "straggler": {"rank", "last_arrivals", "collectives", "caused_wait_ns",
/// "caused_wait_per_step_ns"} or null, "text"} (text: straggler_text, null where "").
nlohmann::json peer_waits_json(const sessions::RunStats& st, int64_t steps);

/// The kernel breakdown: per HTA kernel type (count, total, share) and the `top` kernels by total
/// time (count, total, share, mean, min, max; "... and K more (share S%)" after them); "" without
/// GPU events.
std::string kernel_breakdown_text(const sessions::KernelBreakdown& b, const sessions::SessionReader& session, int64_t top);
/// {"total_ns", "events", "microsecond_rounding", "types": [{"type", "count", "total_ns", "share"}],
/// "kernels": [{"name", "type", "count", "total_ns", "share", "mean_ns", "min_ns", "max_ns"}]}
/// with every kernel.
nlohmann::json kernel_breakdown_json(const sessions::KernelBreakdown& b, const sessions::SessionReader& session);

}  // namespace embedscope::cli
