#pragma once
// The emulated network's floor under a collective (issue 15, plan41; per member since tester48
// F5): a cpu run that emulates a slow network (WorkloadSpec::network, `--network-bandwidth` /
// `--network-latency`) holds every member of every paced collective until the emulated links
// could have moved the bytes it waits for. The rule is the Gloo backend's, commit 0c3457e8
// (comm/gloo_process_group.h emulated_release_ns; engine/comm/gloo/process_group.cpp
// ProcessGroup::run): counted from the call's effective start (the last member's arrival),
// member m is released after
//   all-reduce (Gloo's ring):  max over every member j of port_j
//   otherwise:                 max(port_m, max over the other members j of deliver_j[m])
// where port_j is member j's own port time (emulated_collective_ns: per link class of its
// peers, latency + ceil(max(bytes sent, bytes received) x 1e9 / bandwidth), the slower class
// decides) and deliver_j[m] the time j's port needs to deliver its bytes to m when it shares
// the port max-min fairly among its flows of that class (emulated_delivery_ns). The split-size
// check of an all-to-all or reduce-scatter ("<name>/split_check") is not paced (0). No time
// estimate of such a run can be under it, so the simulated executor
// (TrainerOptions::simulated_network_floor) and the planner's statistics (planner/stats.h
// plan_stats, spec.network) take, for member m,
//   m's time = max(collective_call_ns(members), m's floor from emulated_member_floors_ns)
// (cost/shared_cores.h collective_call_ns: the call's time without the emulation), counted from
// the last member's arrival as the emulation counts it. The planner's pre-ranking estimate
// (planner/prerank.h), which knows a member only by its byte totals, takes the largest member's
// floor (emulated_member_floor_ns) for every member: with equal flows to every peer a sender
// delivers to each peer when its whole port is done, so that is the ring's rule, an upper bound
// of the per-member rule.
// Worked example (nccl-tests' all-to-all: each of n ranks sends (n-1)/n of its S bytes): n = 4
// ranks on one node, S = 1 MiB a rank, an emulated 10 GbE link (1.25e9 B/s) with 50 us latency:
// a member moves 3/4 MiB = 786,432 B, 50,000 + ceil(786,432 / 1.25) = 679,146 ns; every flow
// is 262,144 B, so every delivery ends with the port: every member's floor is 679,146 ns.
// Uneven (tests/engine/cost/network_floor_test.cpp): 3 members on one node at 1 GB/s without
// latency; member 0 sends 3,000 B to member 1 and 1,000 B to member 2, member 1 sends nothing,
// member 2 sends 500 B to each. Ports: 4,000 ns (4,000 B sent), 3,500 ns (3,500 B received),
// 1,000 ns. Member 0's deliveries: to 1 when its port pushed min(3000, 3000) + min(1000, 3000) =
// 4,000 B (4,000 ns), to 2 at 1,000 + 1,000 = 2,000 B (2,000 ns); member 2's: 1,000 ns to each.
// Floors: 4,000, max(3,500, 4,000) = 4,000, max(1,000, 2,000) = 2,000 ns (the largest port,
// the rule before, gave 4,000 to all). Arriving at 0, 2,000 and 7,000 ns, they are released at
// 11,000, 11,000 and 9,000 ns.

#include <cstdint>
#include <span>
#include <vector>

#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// The emulated minimum in ns of member `c.group_rank`'s part of collective call `c` (a program's
/// CollectiveCall: per-peer elements x elem_bytes) on nodes of `gpus_per_node` ranks (global rank
/// r on node r / gpus_per_node) over the emulated network `net`: emulated_collective_ns
/// (comm/gloo_process_group.h) with the call's per-peer bytes; an all-reduce as Gloo's ring does
/// it (its bytes_sent() to the next member, bytes_received() from the one before). 0 when `net`
/// is unlimited or `c` is a split-size check ("<name>/split_check", which the emulation does not
/// pace). This is the member's port time only; the floor it is held to also depends on the other
/// members' bytes: emulated_member_floors_ns. Example: see the file comment.
int64_t emulated_floor_ns(const CollectiveCall& c, int gpus_per_node, const NetworkSpec& net);

/// The emulated floor of every member of one collective call, in group order, in ns counted
/// from the call's effective start (the last member's arrival), by the Gloo emulation's rule
/// (file comment; comm/gloo_process_group.h emulated_release_ns with every member's port time
/// emulated_floor_ns and deliveries emulated_delivery_ns, all arrivals at 0): an all-reduce's
/// members all get the largest port time; another call's member m the larger of its own port
/// time and each other member's fair-share delivery to it. `calls[j]`: member j's CollectiveCall
/// of the call (its group_rank j, the same peers and kind for all). All 0 when `net` is
/// unlimited, the group has one member, or the call is a split-size check. Cost O(n^2 log n) for
/// n members. Throws std::invalid_argument naming the member when a call is missing or its
/// group_rank / peers do not match. Example: the file comment's uneven all-to-all, floors
/// {4,000, 4,000, 2,000} ns.
std::vector<int64_t> emulated_member_floors_ns(std::span<const CollectiveCall* const> calls, int gpus_per_node,
                                               const NetworkSpec& net);

/// The same floor for a member known only by its byte totals (the planner's pre-ranking
/// estimate): `intra_bytes` to / from peers on its node (max of sent and received), `inter_bytes`
/// to / from other nodes; `has_intra` / `has_inter`: whether it has peers of that class (a class
/// with peers pays its latency even without bytes). Bytes are rounded to whole bytes (negative:
/// 0). 0 when `net` is unlimited. Example: 786,432 B intra over 1.25e9 B/s with 50 us latency,
/// no inter peers: 679,146 ns.
int64_t emulated_member_floor_ns(double intra_bytes, double inter_bytes, bool has_intra, bool has_inter,
                                 const NetworkSpec& net);

}  // namespace embedscope::engine
