#pragma once
// A collective's split check as its own figures (tester51 F4).
//
// Before each all-to-all and reduce-scatter an Embedscope rank runs "<name>/split_check": an
// all-gather of every member's 2n int64 split sizes (engine/program/program_sink.cpp comm;
// comm/gloo process_group.cpp), a cross-check of the splits that TorchRec does not run. The
// DLRM executors (cpu, cuda, simulated) run it inside the collective's comm op, so that op's
// bytes hold both: `stats` showed output_dist/all_to_all at 256 B a step where TorchRec's
// table-wise output dist moves 192 B (2 ranks, batch 4: 4 x 8 x 4 B + 4 x 4 x 4 B), the other
// 64 B being the check's 2 x 2 x 2 x 8 B, while its count counted the all-to-alls only.
// An LM run records the check as an op of its own name: nothing to move there.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/critical_path.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {

/// "output_dist/all_to_all/split_check" -> "output_dist/all_to_all"; "" for a name that is no
/// split check (no "/split_check" suffix, or nothing before it).
std::string split_check_of(const std::string& record_name);

/// For each split-check record of `records` (one step's, every rank) that ran inside a comm op
/// of `ops` on its rank - the op's span holds the record's, and the op's name is the checked
/// collective's or a path prefix of it ("input_dist" holds "input_dist/ids/split_check") - moves
/// the record's bytes out of that op's row of `out` (keyed by the op's name id; rows
/// add_collective_times made from the same ops) into the row's check figures: check_count + 1,
/// check_bytes_sent / check_bytes_received + the record's, bytes_sent / bytes_received - the
/// record's (never below 0). A check in no such op (its own op, or an op without a row) is left
/// as it is. `name_of`: the session's name of a name id (SessionReader::name). Cost
/// O(checks x comm ops of the check's rank). No errors.
void move_split_checks(const std::vector<OpRecord>& ops, const std::vector<CollectiveRecord>& records,
                       const std::function<const std::string&(int32_t)>& name_of, std::map<int32_t, CollectiveTimes>& out);

}  // namespace embedscope::sessions
