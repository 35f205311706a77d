#pragma once
// The emulated network's floor under a collective (issue 15, plan41): a cpu run that emulates a
// slow network (WorkloadSpec::network, `--network-bandwidth` / `--network-latency`) holds every
// member of every collective until the emulated link would have moved its bytes
// (comm/gloo_process_group.h emulated_collective_ns: per link class of the member's peers,
// latency + ceil(bytes x 1e9 / bandwidth), the slower class decides). No time estimate of such a
// run can be under it, so the simulated executor (TrainerOptions::simulated_network_floor), the
// planner's statistics (planner/stats.h plan_stats, spec.network) and the planner's pre-ranking
// estimate (planner/search.h) all take
//   call time = max(collective_call_ns(members), max over members of the member's floor)
// (cost/shared_cores.h collective_call_ns: the call's time without the emulation).
// Worked example (nccl-tests' all-to-all: each of n ranks sends (n-1)/n of its S bytes): n = 4
// ranks on one node, S = 1 MiB a rank, an emulated 10 GbE link (1.25e9 B/s) with 50 us latency:
// a member moves 3/4 MiB = 786,432 B, 50,000 + ceil(786,432 / 1.25) = 679,146 ns.

#include <cstdint>

#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// The emulated minimum in ns of member `c.group_rank`'s part of collective call `c` (a program's
/// CollectiveCall: per-peer elements x elem_bytes) on nodes of `gpus_per_node` ranks (global rank
/// r on node r / gpus_per_node) over the emulated network `net`: emulated_collective_ns
/// (comm/gloo_process_group.h) with the call's per-peer bytes; an all-reduce as Gloo's ring does
/// it (its bytes_sent() to the next member, bytes_received() from the one before). 0 when `net`
/// is unlimited. Example: see the file comment.
int64_t emulated_floor_ns(const CollectiveCall& c, int gpus_per_node, const NetworkSpec& net);

/// The same floor for a member known only by its byte totals (the planner's pre-ranking
/// estimate): `intra_bytes` to / from peers on its node (max of sent and received), `inter_bytes`
/// to / from other nodes; `has_intra` / `has_inter`: whether it has peers of that class (a class
/// with peers pays its latency even without bytes). Bytes are rounded to whole bytes (negative:
/// 0). 0 when `net` is unlimited. Example: 786,432 B intra over 1.25e9 B/s with 50 us latency,
/// no inter peers: 679,146 ns.
int64_t emulated_member_floor_ns(double intra_bytes, double inter_bytes, bool has_intra, bool has_inter,
                                 const NetworkSpec& net);

}  // namespace embedscope::engine
