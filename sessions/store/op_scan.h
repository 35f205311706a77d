#pragma once
// Every op of a session file, lane by lane, from the packed copy (`op_blocks`, schema 12) or
// from the `ops` rows: the one scan behind SessionReader::all_ops() and for_each_lane_ops()
// (embedscope/sessions/store/op_stream.h). Private to the sessions library.

#include <functional>
#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"

struct sqlite3;

namespace embedscope::sessions::detail {

/// Calls `fn` once per lane that holds ops, in lane-key order (rank * 256 + lane: by rank, then
/// lane), with the lane's ops in the order of the ops key (start_ns, then write order) and
/// rank/lane set: together the records of `SELECT ... FROM ops ORDER BY lane_key, start_ns`.
/// `packed`: decode `op_blocks` (the caller saw its marker row: the copy is complete), one
/// statement over the table's blocks in key order; the ops decoded must add up to the marker's
/// op_count. Otherwise one ordered scan of the `ops` rows. One lane's ops are held at a time
/// (`fn` may move them away). Throws SessionError naming `path` for an SQLite error, a damaged
/// block or row, or a packed copy whose op count is not the marker's.
void scan_lanes(sqlite3* db, const std::string& path, bool packed,
                const std::function<void(std::vector<OpRecord>& lane_ops)>& fn);

}  // namespace embedscope::sessions::detail
