// tester49 F-C (fixa49): a rank SIGSTOPped mid-run never arrives at a collective; its peers time
// out and close their connections, and when it runs again its own collective fails as a
// consequence. Its failure key ("1") then came after the peers' failure, yet they said "rank(s) N
// did not come: a collective of their own failed first". peer_failure_text (exec/launch/
// peer_failure.h) now says that only of a peer whose key was there before the rank's own failure.
#include <gtest/gtest.h>

#include <string>

#include "exec/launch/peer_failure.h"

namespace {
using embedscope::engine::launch::PeerFailureFacts;
using embedscope::engine::launch::peer_failure_text;

// rank 0 of 3 timed out after 2,000 ms in a collective that ranks 1 and 2 had not arrived at
PeerFailureFacts fixa49_timed_out() {
  PeerFailureFacts f;
  f.missing = {1, 2};
  f.timed_out = true;
  f.timeout_ms = 2000;
  f.wait_ms = 3000;
  return f;
}
}  // namespace

TEST(Fixa49PeerFailure, AStoppedRankContinuedLaterIsNotSaidToHaveFailedFirst) {
  PeerFailureFacts f = fixa49_timed_out();
  f.missing = {2};
  f.failed = {{1, "1"}, {2, "1"}};  // rank 1 arrived (its collective failed with this one's); rank 2 came back late
  EXPECT_EQ(peer_failure_text(f),
            " (rank(s) 2 did not arrive within the 2000 ms collective timeout: nothing of their own had failed by then "
            "(a stopped, stalled or slow process); their collective failed after this one)");
}

TEST(Fixa49PeerFailure, ARankWhoseCollectiveFailedBeforeThisOneIsSaidToHaveFailedFirst) {
  // tester36 D8's case: rank 1's own collective failed (rank 2 was killed) before rank 0's
  PeerFailureFacts f = fixa49_timed_out();
  f.timed_out = false;
  f.failed = {{1, "1"}};
  f.failed_before = {1};
  f.died = {{2, "was killed by signal 9 (Killed) (seen by launch)"}};
  EXPECT_EQ(peer_failure_text(f), " (rank 2 was killed by signal 9 (Killed) (seen by launch))"
                                  " (rank(s) 1 did not come: a collective of their own failed first)");
}

TEST(Fixa49PeerFailure, EachPeerIsNamedByWhatItsOwnRecordSays) {
  PeerFailureFacts f;
  f.missing = {1, 2, 3, 5};
  f.timed_out = false;  // the collective broke early (a peer's connection)
  f.timeout_ms = 20000;
  f.wait_ms = 21000;
  f.failed = {{4, "out of memory allocating 2.0 MiB"}, {3, "1"}, {1, "1"}, {2, "1"}};
  f.failed_before = {2, 4};
  f.silent = {5};
  EXPECT_EQ(peer_failure_text(f),
            " (rank 4 failed: out of memory allocating 2.0 MiB)"
            " (rank(s) 2 did not come: a collective of their own failed first)"
            " (rank(s) 3, 1 had not arrived when this collective failed: nothing of their own had failed by then; their "
            "collective failed after this one)"
            " (rank(s) 5 reported no failure within 21000 ms: the process did not answer: it exited, was killed, or is "
            "stopped or stalled)");
  // nothing to say: every peer arrived and failed with this collective
  PeerFailureFacts none = fixa49_timed_out();
  none.missing.clear();
  none.failed = {{1, "1"}, {2, "1"}};
  none.failed_before = {1};
  EXPECT_EQ(peer_failure_text(none), "");
}
