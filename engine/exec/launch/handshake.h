#pragma once
// The start of a run of one rank per process, through the run's store (store.h), before any
// Gloo group connects and before the session file exists:
//  1. claim: rank R sets "claim/R" to a token of its own (host:pid:random); a set key means
//     another process has rank R (or an earlier run of this run id left its keys): refused.
//  2. digest: rank R sets "digest/R" to {"digest", "workload", "plan"} (the validated spec and
//     the plan as JSON, the FNV-1a 64 of their text) and waits until every rank's claim and
//     digest are set (naming the ranks that did not arrive within the timeout); then reads its
//     claim back (two processes that raced for one rank: the one overwritten is refused) and
//     compares its digest with every other rank's: the lowest rank that differs is named,
//     with the first differing field (a JSON pointer) and both values.
//  3. clock: rank R > 0 sets "clock/req/R", rank 0 answers each with "clock/resp/R" = its
//     wall clock (Unix ns) when it saw the request; R's offset to rank 0 is that minus the
//     midpoint of R's send and receive times, and its uncertainty half that round trip
//     (Cristian's algorithm). Rank 0's offset is 0.
// Internal to the engine.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "store.h"

namespace embedscope::engine::launch {

struct HandshakeResult {
  int64_t clock_offset_ns = 0;         ///< rank 0's wall clock minus this process's, ns
  int64_t clock_uncertainty_ns = 0;    ///< half the round trip of the measurement, ns
  int64_t rendezvous_ns = 0;           ///< from the claim until every rank had arrived, ns
  std::string digest;                  ///< 16 hex digits
};

/// Thrown by handshake when its cancel flag (Ctrl-C, SIGTERM: TrainerOptions::cancel) is set
/// while it waits for the other ranks; run_training ends the run "cancelled" without a session
/// (exit 0, as a run cancelled with Ctrl-C). what(): "<store> (run id <id>): cancelled during
/// the rendezvous (rank R of W; rank(s) X had not arrived)".
class RendezvousCancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// FNV-1a 64 of `text`, as 16 lower-case hex digits.
std::string fnv1a64_hex(const std::string& text);

/// The first place where `a` and `b` differ, depth first in key order: "/batch_size: 256 vs
/// 512" (values as compact JSON), "/tables/2: missing vs {...}"; "" when equal.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& where = "");

/// Runs steps 1-3 for rank `rank` of `world`, waiting at most `timeout` for the other ranks.
/// `document` is what the digest covers ({"workload", "plan"}). While it waits it also ends at
/// once (polled every few ms) when
///  - `cancel` (may be null) is set: throws RendezvousCancelled;
///  - a rank that has not arrived has a death key "dead/R" (its launcher saw it die,
///    report_dead_rank): throws std::runtime_error (a failure, exit 1) naming it and how it ended;
///  - a rank that has not claimed has a refusal key "refused/R" (report_refused_rank) written
///    no more than `timeout` before this rank arrived (an older one is an earlier run's): throws
///    SpecError naming the rank and its reason.
/// Throws SpecError (bad input): a claimed rank, ranks that did not arrive (named, with the
/// store and run id), a digest that differs (naming both ranks and the first differing field,
/// this rank's digest and value first).
HandshakeResult handshake(RunStore& store, int rank, int world, const nlohmann::json& document,
                          std::chrono::milliseconds timeout, const std::atomic<bool>* cancel = nullptr);

/// The value of a refusal key "refused/R": {"reason": `reason`, "wall_ns": now (Unix ns)}.
std::string refusal_value(const std::string& reason);

}  // namespace embedscope::engine::launch
