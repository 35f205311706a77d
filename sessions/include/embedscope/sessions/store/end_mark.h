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

/// A session its writer left in WAL mode (the run was SIGKILLed: FILE.db plus FILE.db-wal,
/// tester41 #11) checkpointed into FILE.db, which is then the whole session, in journal mode
/// DELETE (no -wal). Only where that is safe, else false with nothing changed: there is a
/// non-empty -wal; the metadata says ended = running and names this host as the writer's
/// (a writer on another host over a network file system cannot be checked); no live writer
/// holds it (its flock, or its pid alive: the check `--force-overwrite` makes); and the
/// writer's lock is then taken (flock LOCK_EX | LOCK_NB) for the checkpoint, so a writer that
/// started meanwhile makes it fail, not the other way round. A reader with the file open can
/// make the checkpoint fail (SQLite waits 0.5 s): false. `why` (optional) says why not.
/// The metadata is not changed (the session still reads "crashed"). Never throws.
bool checkpoint_abandoned_session(const std::string& path, std::string* why = nullptr);

}  // namespace embedscope::sessions
