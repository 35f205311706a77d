#pragma once
// One process's own session of a multi-process run (`launch`, `mpirun`, `run --rank`: metadata
// process_rank), which holds its own rank only: a command that needs the whole run (rebalance:
// every rank's lookups; calibrate: every rank's ops and collectives) refuses it, naming the
// merged session (X.db beside X.rankR.db, as launch writes it) or the merge that makes it
// (crit42 / tester42 F20, cli43). A merged session keeps process_rank but holds every rank: it is
// not partial.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace embedscope::sessions {

class SessionReader;

/// What a partial rank session lacks: the process's rank (metadata process_rank, as written),
/// the run's world size (metadata world_size) and how many ranks have a lane in the file.
struct PartialRankSession {
  std::string process_rank;
  int64_t world_size = 0;
  int64_t ranks_here = 0;
};

/// The session's shortfall when it is one process's session of a run of 2 or more ranks that
/// lacks some of them (lanes of fewer ranks than world_size); nullopt for a session of a single
/// process (no process_rank), a world of 1, and a merged session (every rank has a lane).
/// Reads metadata and lanes only; throws SessionError as the reader does.
std::optional<PartialRankSession> partial_rank_session(const SessionReader& session);

/// The refusal of `file` (a partial rank session, `part`) by a command that needs the whole run:
///   "<file>: the session of rank <R> alone of a <N>-rank run (each process wrote its own): the
///    <missing> of the other <K> rank(s) are not in it, so <why>; <hint>"
/// where <hint>, for a file named X.rankR.db, is "<command> the merged session X.db (launch wrote
/// it beside the ranks' sessions)" when X.db exists, else "merge the ranks' sessions (embedscope
/// merge X.rank*.db -o X.db) and <command> that"; for another name "merge the ranks' sessions
/// (embedscope merge RANK0.db RANK1.db ... -o MERGED.db) and <command> that". Example: file
/// "x.rank1.db", rank 1 of 2, missing "lookups", why "the load and imbalance would be false",
/// command "rebalance", x.db present -> "x.rank1.db: the session of rank 1 alone of a 2-rank run
/// (each process wrote its own): the lookups of the other 1 rank are not in it, so the load and
/// imbalance would be false; rebalance the merged session x.db (launch wrote it beside the ranks'
/// sessions)". Checks the file system for X.db; never throws except std::bad_alloc.
std::string partial_rank_session_refusal(const PartialRankSession& part, const std::string& file, std::string_view missing,
                                         std::string_view why, std::string_view command);

}  // namespace embedscope::sessions
