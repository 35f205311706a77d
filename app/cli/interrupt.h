#pragma once
// Ctrl-C as a request to stop cleanly: the first SIGINT sets a flag the command polls (a run
// stops after its current step, an import before its next file or rank) and says so on stderr;
// a second SIGINT ends the process at once (the default action).

#include <atomic>

namespace embedscope::cli {

/// Installs the SIGINT handler and returns the flag it sets. `said` (a string literal: the
/// handler writes it with write(2), which is async-signal-safe) is printed on the first Ctrl-C.
std::atomic<bool>& cancel_on_sigint(const char* said);

}  // namespace embedscope::cli
