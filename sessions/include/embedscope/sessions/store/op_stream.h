#pragma once
// Every op of a session, one lane at a time: what the analyses (analyze, gpu_kernel_figures),
// `embedscope stats` and `embedscope export` read instead of holding SessionReader::all_ops().
// A closed session of schema 12 is read from its packed copy (`op_blocks`, as
// SessionReader::lane_ops reads one lane); older files and files whose writer never closed
// (killed or live runs) from the `ops` rows. Both give the same records in the same order.

#include <functional>
#include <vector>

#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// Calls `fn` once per lane that holds ops, lanes ordered by (rank, lane), with that lane's ops
/// ordered by start (ties in the order they were written) and their rank and lane set: the
/// calls together give exactly session.all_ops(), lane by lane. Reads `op_blocks` where
/// session.has_op_blocks() (the marker of a closed schema-12 session), else the `ops` rows, on a
/// read-only connection of its own to session.path() (the reader's rules: it never writes).
/// Holds one lane's ops at a time; `fn` may keep them (std::move) or change them. Throws
/// SessionError naming the file for an unreadable file, a damaged block or row, or packed
/// blocks whose op count differs from their marker row's; exceptions from `fn` pass through.
void for_each_lane_ops(const SessionReader& session, const std::function<void(std::vector<OpRecord>& lane_ops)>& fn);

}  // namespace embedscope::sessions
