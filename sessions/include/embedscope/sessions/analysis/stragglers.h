#pragma once
// Stragglers: per rank, how long it waited in collectives for its peers and how often it was the
// last to arrive, and the rank whose late arrivals cost its peers the most waiting. The answer
// Holistic Trace Analysis and Nsight users look for as "straggler rank", from the collective
// instances the critical path already matches across ranks (critical_path.h: one instance is the
// ops of every member with the same process group, name and sequence number). Needs no load
// counters, so it answers for imported traces as for Embedscope's runs.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/critical_path.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {

/// One rank's waits in the collectives of the counted steps (sum over steps; ns).
struct RankPeerWait {
  int32_t rank = 0;
  /// Collective instances the rank took part in that ran on at least two ranks (the only ones
  /// in which anybody can arrive last).
  int64_t collectives = 0;
  /// For each of its ops in a collective instance: from its own start to the latest start of a
  /// member of the instance (capped at its own end), summed: the rank's share of
  /// CollectiveTimes::wait_ns (summed over ranks the two are equal).
  int64_t waited_ns = 0;
  /// Instances (of `collectives`) in which this rank's op started last, later than some other
  /// member's: its peers waited for it. Ranks that start together at the latest start share it.
  int64_t last_arrivals = 0;
  /// The waiting of the other ranks' members in the instances this rank arrived last in (split
  /// evenly, remainder to the lowest rank, where several ranks tie at the latest start): the wait
  /// this rank cost its peers.
  int64_t caused_wait_ns = 0;
  friend bool operator==(const RankPeerWait&, const RankPeerWait&) = default;
};

/// Adds one step's waits to `out` (keyed by rank): `instances` is collective_instances(ops, ..)
/// of the same `ops` (indices into it). Instances with members on one rank only add their wait to
/// waited_ns (as CollectiveTimes::wait_ns counts it) but no collective or arrival. Cost linear in
/// the instances' members.
void add_peer_waits(const std::vector<OpRecord>& ops, const std::map<CollectiveKey, std::vector<size_t>>& instances,
                    std::map<int32_t, RankPeerWait>& out);

/// The straggler of `ranks`: the rank whose late arrivals cost its peers the most waiting
/// (caused_wait_ns; the lower rank on a tie), or nullopt when no rank kept a peer waiting (one
/// rank, no collective on two ranks, or every member of every instance started together).
std::optional<RankPeerWait> straggler(const std::vector<RankPeerWait>& ranks);

/// The `straggler` line of `stats` (without its "straggler    " column), per counted step
/// (`steps` > 0; a whole trace: 1): "rank 1: the last to arrive in 1 of 1 collectives; its peers
/// waited 0.15 ms for it (0.07 ms per step)"; "none: no rank kept its peers waiting in a collective
/// (N collectives on 2 ranks or more)"; "" when no collective ran on two ranks or more (nothing to
/// say: a single rank, a trace without collectives).
std::string straggler_text(const std::vector<RankPeerWait>& ranks, int64_t steps);

}  // namespace embedscope::sessions
