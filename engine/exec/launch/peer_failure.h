#pragma once
// What a rank whose collective failed says of its peers (ProcessExecutor::explain_peer_failure):
// the facts it gathered from the run's store, put into words by a pure function so that every
// case is tested without processes (tests/engine/exec/launch/fixa49_peer_failure_test.cpp).
// Internal to the engine.

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace embedscope::engine::launch {

/// What this rank knew of its peers when it explained its failed collective.
struct PeerFailureFacts {
  std::vector<int> missing;     ///< CollectiveError::missing_ranks: had not arrived at this collective
  bool timed_out = false;       ///< CollectiveError::timed_out: it waited the whole timeout
  int64_t timeout_ms = 0;       ///< the collective timeout, ms
  int64_t wait_ms = 0;          ///< how long this rank waited for the peers' word, ms
  /// failure keys read, in the order read: (rank, value); value "1" = a collective of the peer's
  /// own failed, else the peer's own error (an OOM, a crash), as on_rank_failed set it
  std::vector<std::pair<int, std::string>> failed;
  /// the ranks whose failure key was in the store before this rank's own failure (on_rank_failed
  /// reads them before it sets its own): their failure came first
  std::set<int> failed_before;
  std::vector<std::pair<int, std::string>> died;  ///< death keys the launcher wrote: (rank, how)
  std::vector<int> silent;                        ///< no key within wait_ms
};

/// The words appended to the failed collective's message, each in parentheses, in this order:
/// "(rank R failed: WHY)" per peer with its own error; "(rank R HOW)" per death key; for the
/// peers in `missing` whose key says a collective of their own failed: those whose key came
/// before this rank's failure "(rank(s) A, B did not come: a collective of their own failed
/// first)", the others - they never arrived, and their collective failed only after this one,
/// a consequence of it (tester49 F-C: a SIGSTOPped rank continued later was blamed) - "(rank(s) C
/// did not arrive within the T ms collective timeout: nothing of their own had failed by then
/// (a stopped, stalled or slow process); their collective failed after this one)", or when the
/// collective ended early (a peer's connection broke, timed_out false) "(rank(s) C had not
/// arrived when this collective failed: nothing of their own had failed by then; their
/// collective failed after this one)"; then the silent ranks "(rank(s) D reported no failure
/// within W ms: the process did not answer: it exited, was killed, or is stopped or stalled)".
/// A peer with key "1" that is not in `missing` (it arrived) is not named. "" when nothing applies.
std::string peer_failure_text(const PeerFailureFacts& facts);

}  // namespace embedscope::engine::launch
