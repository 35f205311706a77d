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

/// What the writer lock of `path` says, probed with flock(LOCK_SH | LOCK_NB) on a descriptor of
/// its own (released at once): `held` (EWOULDBLOCK: a writer, of this process or another, holds
/// LOCK_EX), `free` (the probe got the lock: flock works on this file system and no writer holds
/// it), `unknown` (the file cannot be opened, or flock fails otherwise - ENOLCK, EINVAL,
/// EOPNOTSUPP, ENOSYS: a file system without flock). Where `holder` is given it receives the
/// holder's pid from /proc/locks (0 when not listed or not held).
enum class WriterLock { held = 0, free = 1, unknown = 2 };
WriterLock probe_writer_lock(const std::string& path, long* holder = nullptr);

/// Why `path` must not be replaced: "" when no live writer holds it, else a sentence naming the
/// writer, e.g. "a run (pid 4242) is still writing it". Where flock works (probe_writer_lock
/// says held or free) the lock alone decides: held is live (the pid from /proc/locks, else the
/// metadata `writer_pid`); free is not, whatever the metadata says (a killed run's pid may name
/// another process since). Only where it says unknown: live when the file's metadata says `ended`
/// = running with a `writer_pid` of this host that is alive and not this process. Never changes
/// the file.
std::string live_writer(const std::string& path);

}  // namespace embedscope::sessions::detail
