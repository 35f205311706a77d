#pragma once
// How a run stopped at once (a second Ctrl-C or SIGTERM: tester41 #21) is recorded in its
// session: its writer thread is not asked to finish (the process ends without running another
// step), so a connection of its own writes the end into the metadata. Without it the session
// read "crashed".

#include <string>

namespace embedscope::sessions {

/// Writes metadata ended = `ended` and end_message = `message` into the session at `path`
/// through a connection of its own, in one transaction, waiting at most `busy_ms` for the
/// writer's transaction in progress (WAL mode: the writer's committed rows stay; what it had
/// not committed is lost, as it would be at exit). Returns false, having written nothing, where
/// the file is not a session (no metadata table), cannot be opened, or its lock was not had in
/// time. Never throws. Not async-signal-safe: call it from a thread, not a signal handler.
bool mark_session_ended(const std::string& path, const std::string& ended, const std::string& message,
                        int busy_ms = 2000);

}  // namespace embedscope::sessions
