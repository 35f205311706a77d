#pragma once
// How a rank's failure ends a run, shared by the threaded executors (the DLRM ranks of rank.h
// and the lm_embedding ranks of lm_executor.h). Internal to the engine.

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/exec/run.h"

namespace embedscope::engine::threaded {

/// One rank's failure: when (run clock ns), how it ends the run, and the message.
struct RankError {
  int rank = 0;
  int64_t time_ns = 0;
  RunEnd kind = RunEnd::crashed;
  bool bad_input = false;
  bool consequence = false;  // a peer's failure seen from here
  std::string message;
};

/// The failure `e` of rank `rank` at `time_ns`: InvalidIdsError and InputFileError end
/// "bad_input" (their text as is); sessions::SessionWriteError ends "write_failed"; OomError ends "oom"; SplitMismatchError crashes; CollectiveError
/// ends "hang" when its timeout expired, else crashes as a consequence of a peer's failure
/// ("rank R: <what><explain_peer(e)>"; explain_peer may be empty); anything else crashes
/// ("rank R: <what>", "rank R: unknown error" for a non-std exception).
RankError rank_error_of(int rank, int64_t time_ns, const std::exception_ptr& e,
                        const std::function<std::string(const CollectiveError&)>& explain_peer = {});

/// Throws std::runtime_error "training diverged: the loss is <loss> at step <step>" (fmt's
/// spelling: nan, -nan, inf) when `loss` is not finite; returns otherwise. Both threaded
/// executors call it once a step's (all-reduced, so every rank's same) loss is known and before
/// the step is recorded, so the run ends "crashed" with that message and every earlier step kept
/// (the session's steps.loss is NOT NULL: tester47 F7). `step` the session's step number.
void throw_if_diverged(double loss, int64_t step);

/// The failure that ended the run: the first (earliest) that is not a consequence of another's,
/// else the earliest. `errors` not empty.
RankError first_failure(std::vector<RankError> errors);

}  // namespace embedscope::engine::threaded
