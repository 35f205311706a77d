#pragma once
// POSIX (fcntl) record locks belong to a process and a file: closing ANY descriptor of a file
// drops every POSIX lock the process holds on it, SQLite's included (SQLite, "How To Corrupt An
// SQLite Database File", 2.2: "Posix advisory locks canceled by a separate thread doing close()").
// A session writer's connection holds a shared lock on its file for its whole life (WAL mode);
// once a probe of the same process (a header read, the writer-lock probe) closed its descriptor,
// another process's read-write connection (the sqlite3 shell, Python) closing last took the
// exclusive lock, checkpointed and deleted the -wal and -shm under the live writer: later
// commits went to an unlinked -wal that readers never saw and a killed run lost.
//
// So a SessionWriter registers its file here while SQLite has it open, and every descriptor this
// library opens on a file that may be a session is closed with close_keeping_locks(): a
// descriptor of a registered file is kept open until the last writer of the file in this process
// has closed its connection (what SQLite's own unix VFS does for its descriptors: unixInodeInfo's
// pUnused list). Internal to the sessions library; thread-safe.

#include <string>

namespace embedscope::sessions::detail {

/// Registers the file of descriptor `fd` (by device and inode) as written by a SessionWriter of
/// this process: from now on close_keeping_locks() keeps descriptors of it open. Counted (two
/// writers of one file: two holds). A descriptor fstat cannot read is ignored.
void hold_file_locks(int fd);

/// Undoes one hold_file_locks() of the same file; at the last, closes the descriptors kept for
/// it. Call after the writer's SQLite connection is closed and before closing `fd` itself.
void release_file_locks(int fd);

/// close(fd), unless fd's file is held (above): then fd is kept open until the hold is released.
/// Never throws; fd < 0 is ignored.
void close_keeping_locks(int fd);

/// The first `max_bytes` bytes of `path` as stored (no decompression), read with a descriptor
/// closed by close_keeping_locks(); "" when the file cannot be opened. Never throws.
std::string read_file_prefix(const std::string& path, size_t max_bytes);

/// How many descriptors are kept open now, over every held file (tests).
int kept_descriptors();

}  // namespace embedscope::sessions::detail
