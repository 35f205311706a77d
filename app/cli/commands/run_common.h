#pragma once
// What every command that runs a workload and writes its session says and does the same way,
// whatever the workload (DLRM or lm_embedding) and whichever command runs it (`run`, `scenario`):
// the end of a run that failed, the progress lines, and a second Ctrl-C / SIGTERM
// (tester47 F2, F3, F7: the lm_embedding run had its own, lesser, copy of each).

#include <string>

namespace embedscope::cli {

/// A run that ended while running (oom, hang, crashed): prints "error: run ended ENDED: ERROR"
/// and "session: SESSION" on stderr, and with `as_json` {"ended", "error", "session"} on stdout.
/// Returns the exit code: 2 where the run found bad input (`bad_input`: a malformed input file),
/// else 1 (README's exit codes).
int report_failed_run(const std::string& ended, const std::string& error, const std::string& session, bool as_json,
                      bool bad_input);

}  // namespace embedscope::cli
