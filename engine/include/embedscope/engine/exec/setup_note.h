#pragma once
// A rank's setup before its first step (its tables' initial values, its allocations): how long
// its peers wait for it, and the lines a long one prints (exec/threaded/rank_setup.cpp).

#include <cstdint>
#include <functional>
#include <string>

namespace embedscope::engine {

/// A rank initialising this many bytes of table rows and optimizer state or more says so
/// (1 GiB: about 6 s at the 175 MB/s measured for 5e7 x 12 fp32 rows on 2 loaded cores).
constexpr int64_t kSetupNoteBytes = int64_t{1} << 30;
/// How long a rank waits for its peers to finish their setup before the first step: 30 minutes,
/// PyTorch's default process-group timeout (torch.distributed's default_pg_timeout), in place of
/// the workload's collective_timeout_ms, which counts from the first step on. A rank stopped or
/// stuck in its setup ends the run as a hang after it, not never (13.4 GiB of rows took 204 s).
constexpr int64_t kSetupTimeoutMs = int64_t{30} * 60 * 1000;

/// Where the lines about a long setup go, from any rank's thread (unset or empty: nowhere):
/// before a rank initialises kSetupNoteBytes or more, "rank R: initialising N rows (X GiB) of
/// embedding tables before the first step", and after it "rank R: tables initialised in T s".
/// One sink for the process (the CLI prints them on stderr); set it before run_training.
void set_setup_note_sink(std::function<void(const std::string&)> sink);
/// Sends `line` to the sink set last (under a lock: lines of several ranks never interleave).
void setup_note(const std::string& line);

}  // namespace embedscope::engine
