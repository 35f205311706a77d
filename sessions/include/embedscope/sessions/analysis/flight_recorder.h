#pragma once
// Where a run's collectives stopped, from the ranks' flight recorder dumps (table
// `flight_recorder`; engine/comm/flight_recorder.h). The questions PyTorch's flight recorder
// analyser (torch/distributed/flight_recorder, `fr_trace`) answers for NCCL dumps: which rank
// did not reach which collective, which ranks are in a different collective at the same
// sequence number, and which ranks entered two process groups in opposite orders (each waits in
// one group for a peer that waits in the other: a deadlock no timeout cures).
//
// Reads the last dump of every rank. A rank's position in a group is the highest sequence number
// it entered there and the highest it completed; the collective a rank waits in is its oldest
// entry that did not complete. Ranks of the world that left no dump are named (a killed process
// writes none).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/sessions/model/flight_record.h"

namespace embedscope::sessions {

class SessionReader;

/// One rank as its last dump shows it.
struct FlightRankState {
  int32_t rank = 0;
  bool dumped = false;           ///< false: the rank left no dump (the fields below are empty)
  int32_t dump = 0;              ///< its last dump's number
  std::string reason;            ///< why that dump was written
  int64_t dump_time_ns = 0;
  int64_t entries = 0;           ///< entries in the dump
  int64_t ring_dropped = 0;      ///< older entries its ring had overwritten
  std::optional<FlightRecord> waiting;         ///< its oldest collective that did not complete
  std::optional<FlightRecord> last_completed;  ///< its newest completed collective
  /// Every collective of the dump that did not complete, oldest first (`waiting` is the first):
  /// a rank can be inside two at once (the dense all-reduce on one lane, a dist on another).
  std::vector<FlightRecord> in_flight;
  /// false: the rank is not in this session (a rank-per-process session holds one rank; its
  /// peers' dumps are in their own sessions). Such a rank is neither "no dump" nor "killed".
  bool in_session = true;
  /// Non-empty when the rank's last dump was set aside as older than the failure its peers
  /// dumped at (a SIGUSR1 snapshot taken before they entered the collective they failed in):
  /// the rank then counts as having left no dump at the failure, and this says why.
  std::string stale_dump;
};

/// One process group over the dumps.
struct FlightGroupState {
  std::string group;
  std::vector<int32_t> members;         ///< global ranks in group order (from the first dump naming the group)
  std::vector<uint64_t> entered;        ///< per member: highest sequence entered; 0 none seen (or no dump)
  std::vector<uint64_t> completed;      ///< per member: highest sequence completed; 0 none
  std::vector<bool> dumped;             ///< per member: it left a dump
  /// The highest sequence every member that dumped completed (0: none), and that collective's
  /// entry as one of them recorded it.
  uint64_t completed_everywhere = 0;
  std::optional<FlightRecord> completed_everywhere_entry;
};

/// One conclusion, in a sentence that names the ranks, groups and sequence numbers.
struct FlightFinding {
  enum class Kind {
    opposite_order,  ///< two ranks wait for each other in two groups
    mismatch,        ///< members ran different collectives (op or name) at one sequence, or disagree on a group's members
    not_reached,     ///< a member never entered the collective its peers wait in
    /// A member spent longer than the group's timeout inside a collective a peer timed out in (it
    /// completed it late: a stopped or stalled process), so that peer never reached the next one;
    /// or it failed in a collective long after every peer had failed (its process did not run).
    stalled,
    no_dump,         ///< a rank of the world left no dump
  };
  Kind kind = Kind::not_reached;
  std::string text;
  std::vector<int32_t> ranks;      ///< the ranks it is about (e.g. the two of an opposite order)
  std::vector<std::string> groups; ///< the groups, in the order of `ranks` for opposite_order
  std::vector<uint64_t> sequences; ///< the sequence numbers, likewise
};

/// "opposite_order", "mismatch", "not_reached", "no_dump", "stalled".
const char* to_string(FlightFinding::Kind k);

struct FlightAnalysis {
  std::vector<FlightRankState> ranks;    ///< every rank of the world and of the groups, ascending
  std::vector<FlightGroupState> groups;  ///< by name
  /// Most telling first: opposite orders, mismatches, stalled ranks, ranks that did not reach a
  /// collective, ranks without a dump. Empty when every rank completed everything it entered.
  std::vector<FlightFinding> findings;
  /// When there is no finding but some rank is inside a collective, what that means, in one
  /// sentence: a snapshot of a run that went on (every dump SIGUSR1), collectives every member
  /// entered but none started (the store or transport failed before data moved), or transfers
  /// that did not finish. "" otherwise.
  std::string in_flight_note;
  bool empty() const { return ranks.empty(); }
};

/// Analyses `records` (any order, any number of dumps per rank; the last of each rank is used).
/// `world_size` (0: unknown) adds ranks 0..world_size-1 that left no dump. `absent`: ranks of the
/// world that are not in the session analysed (a rank-per-process session): named as such, never
/// as ranks that left no dump. A rank whose last dump is a SIGUSR1 snapshot older than the
/// collective its peers' failure dumps wait in (time_created_ns of their oldest unfinished entry)
/// counts as having left no dump at the failure (FlightRankState::stale_dump says why). Empty
/// records give an empty analysis. Pure; never throws for well-formed records (a `members` list
/// that does not parse as comma-separated integers counts as a group of no members).
///
/// A member L that waits in (G, s) after its own failure, where a peer P's record of (G, s)
/// completed time_completed_ns - time_created_ns > timeout_ms after it entered (P's own clock),
/// is not said to have not reached (G, s + 1): P stalled inside (G, s) for longer than the
/// timeout L gave up after (tester47 F10: a SIGSTOPped rank). Finding `stalled`, ranks {P},
/// sequences {s}: "rank 1 stalled in all_gather 'x' (group world, sequence 1739): it spent 45.0 s
/// in it, longer than the 30000 ms timeout after which rank 0 gave up (a stopped or stalled
/// process: SIGSTOP, swapping, a debugger); rank 0 then left it and did not reach all_to_all 'y'
/// (group world, sequence 1740), which rank 1 waits in".
///
/// A failed record (state not completed, time_completed_ns >= 0: the time it threw on that
/// rank) of rank X in (G, s), where X entered (G, s) before the first other member of G failed
/// (its earliest failed record, any collective) and failed there more than max(timeout_ms,
/// 1000 ms) after the last of them had (the session clock), says X did not run meanwhile: a rank
/// closes its connections when it fails, so a running member leaves any collective at once then,
/// or at its own timeout before (tester53 F4: a rank SIGSTOPped inside a collective and
/// continued after its peers' timeout). Finding `stalled`, ranks {X}, sequences {s}, one per rank
/// (its oldest such collective), before the not_reached ones: "rank 2 stalled in all_gather 'x'
/// (group world, sequence 1189): it had entered it before ranks 0, 1 failed (300 ms timeout), and
/// failed there only 3.7 s after the last of them, 4.0 s after it entered; a running rank leaves a
/// collective at its timeout or as soon as its peers close their connections, so rank 2's process
/// did not run meanwhile (a stopped or stalled process: SIGSTOP, swapping, a debugger; not a slow
/// link)". Files without failure times (written before they were recorded) never give it.
///
/// Example: ranks 0 and 1 both in groups a and b; rank 0 completed a#1, b#1 and waits in a#2;
/// rank 1 completed a#1, b#1 and waits in b#2. Findings: opposite_order, ranks {0, 1}, groups
/// {a, b}, sequences {2, 2}: "ranks 0 and 1 entered process groups a and b in opposite orders:
/// rank 0 waits in all_reduce 'x' (group a, sequence 2) and has not reached group b's sequence 2;
/// rank 1 waits in all_reduce 'y' (group b, sequence 2) and has not reached group a's sequence 2".
FlightAnalysis analyze_flight_records(const std::vector<FlightRecord>& records, int world_size = 0,
                                      const std::vector<int32_t>& absent = {});
/// Defers to a rank's own recorded hang (retest47 R9): `end_message` is the session's end message
/// (metadata end_message; a merged session prefixes it with the rank session's name), e.g.
/// "rank 0: all_gather 'x' (group world, sequence 973) did not finish within 1000 ms: rank(s) 1 did
/// not arrive (...)". A rank it names as not arrived whose own dump shows it entered that
/// collective (group world: its highest sequence entered >= 973) arrived only after the waiting
/// rank's timeout (a stopped or stalled process), not over a slow link: each such rank gets a
/// `stalled` finding (ranks {1}, groups {world}, sequences {973}) unless a `stalled` finding names
/// it at that collective already, inserted before the not_reached and no_dump ones, and
/// in_flight_note is cleared. Text: "rank 1 arrived late in all_gather 'x' (group world, sequence
/// 973): rank 0's own hang records that it had not arrived when its 1000 ms timeout ran out, and
/// rank 1's dump shows it inside the collective since (a stopped or stalled process: SIGSTOP,
/// swapping, a debugger; not a slow link)" ("... shows it entered the collective since" when its
/// dump shows it completed). A message that is no such hang, or names no rank with a dump there,
/// changes nothing.
void defer_to_recorded_hang(FlightAnalysis& a, const std::string& end_message);

/// The same over a session's table (world size from its metadata; in a rank-per-process session
/// (metadata process_rank), the ranks with no lane are `absent`); empty for files without dumps.
/// A session that ended "cancelled" (a signal made every rank finish its step, then stop) has no
/// findings: its dumps, taken when the signal arrived, caught collectives that then completed;
/// in_flight_note says so, naming the signal(s). Any other session's end message is given to
/// defer_to_recorded_hang.
FlightAnalysis analyze_flight_records(const SessionReader& session);

}  // namespace embedscope::sessions
