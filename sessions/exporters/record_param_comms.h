#pragma once
// PyTorch's record_param_comms arguments of a collective record, as both exporters write them
// (internal to the sessions library): the Kineto export on each collective's span and comm
// kernel, the Chrome export on each collective's span inside the comm op that ran it.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"  // collective_bytes_unknown
#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// {"Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size", "In split size",
/// "Out split size", "Process Group Name", "Process Group Ranks", "Seq", "Rank"} of `c` on rank
/// `rank` (kineto_comm_args: counts such that the Kineto importer's byte rule gives back the
/// record's bytes). With `bytes_unknown` (collective_bytes_unknown, analysis.h) a record of 0 B gets no
/// element counts, no splits, and no dtype where its dtype is "unknown": the Kineto importer reads
/// a span without counts as bytes unknown, so a round trip keeps them unknown instead of 0 B.
/// Source: PyTorch's torch/csrc/distributed/c10d/ParamCommsUtils.hpp names.
/// `all_reduce_count`: kineto_comm_args's (an all-reduce's count from its group, all_reduce_counts).
nlohmann::json record_param_comms_args(const CollectiveRecord& c, int32_t rank, bool bytes_unknown,
                                       int64_t all_reduce_count = -1);

}  // namespace embedscope::sessions
