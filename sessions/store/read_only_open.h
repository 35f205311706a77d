#pragma once
// How every reader of a session opens its file: read-only, never making a writer fail, and
// still readable where its -shm file cannot be made (a full disk). Internal to the store.
//
// A session in WAL mode is read through its wal-index, the -shm file beside it (SQLite, "WAL-mode
// file format" https://www.sqlite.org/walformat.html). A read-only connection opens it read-write
// (creating it where it is missing) and, when no other connection has it open, resets it and
// writes one byte into each of its 32 KiB pages so that they are allocated (os_unix.c
// unixShmMap): on a full disk that write fails, and the first query fails with
// SQLITE_IOERR_SHMSIZE ("disk I/O error") although the file and its -wal are whole (launch called
// such a rank session "unreadable").
// SQLite's own way out (https://www.sqlite.org/wal.html, "Read-Only Databases", 3.22.0+): a
// -shm that it may only read (URI parameter readonly_shm=1) is used as it is while a writer holds
// it, and where none does (SQLITE_READONLY_CANTINIT inside SQLite) the connection builds a
// private wal-index in heap memory from the -wal itself, re-read at each read transaction: every
// commit in the -wal, checkpointed or not, is read, and the connection takes only read locks.
// That needs a -shm file to exist; where none does, an empty one (no bytes: no room needed) is
// made first, as SQLite would make it.
//
// Not used, and why: immutable=1 reads the database file alone, without its -wal (the commits
// not yet checkpointed are lost: "database disk image is malformed" for a session whose writer
// failed on a full disk); nolock=1 turns WAL off in the pager ("unable to open database file");
// PRAGMA locking_mode=EXCLUSIVE (a heap wal-index too) takes a write lock on the database file,
// which a read-only descriptor cannot take ("disk I/O error") and which would block a writer.

#include <sqlite3.h>

#include <string>

namespace embedscope::sessions::detail {

/// The SQLite URI of `path` with `query` ("mode=ro", "mode=ro&readonly_shm=1"): "file:" + the
/// path with '%', '?' and '#' percent-encoded (RFC 3986; SQLite decodes them), so that a file
/// name holding them opens that file.
std::string sqlite_file_uri(const std::string& path, const std::string& query);

/// Opens `path` read-only (SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX): no checkpoint when the
/// connection closes (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE) and a wait of up to `busy_timeout_ms` ms
/// while a writer holds a lock for a moment. Its first read (the schema cookie) is tried at
/// once; where it fails for the wal-index (an SQLITE_IOERR_SHM* or SQLITE_CANTOPEN code: no room
/// for the -shm, or no right to create it), the file is opened again with readonly_shm=1, an
/// empty -shm made first where none exists (a private name linked into place: no descriptor of
/// it is ever closed while it is the -shm, which would drop this process's SQLite locks on it).
/// Any other failure (not a database, corrupt, busy) is left to the caller's first query, with
/// the connection as SQLite opened it. Returns the connection (close it with sqlite3_close);
/// throws SessionError "PATH: cannot open: REASON" when SQLite cannot open the file at all.
sqlite3* open_session_read_only(const std::string& path, int busy_timeout_ms);

/// Throws SessionError "PATH: the session file is truncated or corrupt (N bytes, where its SQLite
/// header says P pages of S bytes: M bytes; ...)" when the database file is shorter than its
/// header's page count (bytes 28-31, big-endian) x page size (bytes 16-17; 1 means 65536): an
/// interrupted copy, cut inside its last pages, which SQLite reads as rows of NULLs (SQLite file
/// format, https://www.sqlite.org/fileformat2.html, 1.3). The page count is taken only where the
/// header says it is valid (it is non-zero and bytes 24-27 equal bytes 92-95, as SQLite takes it).
/// Nothing is checked while a -wal that holds at least one whole frame (32 + 24 + page size
/// bytes) is beside the file (a live run in WAL mode, whose checkpoint may grow the file after its
/// first page; a killed run's session, whose commits are in its -wal), or a -journal with content
/// (a hot journal may roll the file back), nor for a file that is not an SQLite database (SQLite
/// says so). A shorter -wal (0 bytes, a header alone) or a 0-byte -journal restores no page, and
/// the check applies (retest54 R5: an interrupted copy of a folder left them). Never changes the
/// file.
void refuse_cut_short(const std::string& path);

/// Whether `rc` (an extended result code of a failed read) is a failure of the wal-index: what
/// open_session_read_only answers with readonly_shm=1.
bool is_wal_index_failure(int rc);

}  // namespace embedscope::sessions::detail
