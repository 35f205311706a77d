#pragma once
// Who is writing a session file: the writer's advisory lock and the live-writer check that
// `--force-overwrite` must pass. Internal to the store.
//
// A SessionWriter holds flock(LOCK_EX) on the session file itself for as long as it writes
// (from claiming the name until SQLite has closed it). flock locks are per open file and
// independent of the POSIX (fcntl) locks SQLite takes on the same file (Linux, local file
// systems), so the lock never interferes with SQLite's own locking.

#include <string>

namespace embedscope::sessions::detail {

/// Creates `path` exclusively (mode 0644; it must not exist) holding flock(LOCK_EX) on it
/// from the moment the name appears (a locked private file hard-linked to `path`).
/// Returns the descriptor, which holds the lock until it is closed: close it only after every
/// SQLite connection of this process to the file is closed (closing any descriptor of a file
/// drops the process's POSIX locks on it, SQLite's included). Throws SessionError naming the
/// file when it cannot be created.
int claim_session_file(const std::string& path);

/// Why `path` must not be replaced: "" when no live writer holds it, else a sentence naming the
/// writer, e.g. "a run (pid 4242) is still writing it". Live means: its writer lock is held
/// (the pid comes from /proc/locks, else from the metadata `writer_pid`), or the file's
/// metadata says `ended` = running with a `writer_pid` of this host that is alive and not this
/// process (a writer without the lock: older builds). Never changes the file.
std::string live_writer(const std::string& path);

}  // namespace embedscope::sessions::detail
