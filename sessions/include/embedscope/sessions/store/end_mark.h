#pragma once
// How a run stopped at once (a second Ctrl-C or SIGTERM: tester41 #21) is recorded in its
// session: its writer thread is not asked to finish (the process ends without running another
// step), so a connection of its own writes the end into the metadata. Without it the session
// read "crashed".

#include <cstdint>
#include <string>

namespace embedscope::sessions {

/// Writes metadata ended = `ended` and end_message = `message` into the session at `path`
/// through a connection of its own, in one transaction, waiting at most `busy_ms` for the
/// writer's transaction in progress (WAL mode: the writer's committed rows stay; what it had
/// not committed is lost, as it would be at exit). Returns false, having written nothing, where
/// the file is not a session (no metadata table, or no `format` row: its header was never
/// committed), cannot be opened, or its lock was not had in
/// time. Never throws. Not async-signal-safe: call it from a thread, not a signal handler.
bool mark_session_ended(const std::string& path, const std::string& ended, const std::string& message,
                        int busy_ms = 2000);

/// What SQLite can read of a session's FILE.db-wal (tester47 F11). SQLite reads a WAL's frames
/// (24-byte header + one page each, after a 32-byte file header) up to the last commit frame
/// whose salts match the file header's and whose running checksum holds (sqlite.org/fileformat2.html
/// "WAL File Format": big-endian fields; the checksum's words are big-endian where the magic is
/// 0x377f0683, little-endian for 0x377f0682); the rest is not read. Units: bytes, frames.
/// Example: page size 4096, 5 committed frames and 100 bytes more of this log: readable_bytes =
/// 32 + 5 x 4120 = 20632, unread_bytes = 100.
struct WalScan {
  bool present = false;          ///< FILE.db-wal exists and is not empty
  int64_t file_bytes = 0;        ///< its size
  int64_t page_size = 0;         ///< from its header (0: header unreadable)
  int64_t committed_frames = 0;  ///< frames SQLite reads (up to the last valid commit frame)
  int64_t readable_bytes = 0;    ///< 32 + committed_frames x (24 + page_size); 0 where the header is bad
  /// Bytes after readable_bytes that belong to this log and that SQLite does not read: frames after a
  /// checksum break, a frame cut short, or a transaction the killed writer did not commit. Frames of an
  /// earlier log (other salts, left over after SQLite restarted the log) are not counted.
  int64_t unread_bytes = 0;
  int64_t unread_frames = 0;     ///< whole frames among unread_bytes (a cut frame is not counted)
  /// Why SQLite stops where it does: "" (nothing unread), "a checksum break in frame K at byte B",
  /// "cut short inside frame K at byte B", "frames after the last commit were never committed",
  /// "its header is damaged". K counts from 1.
  std::string problem;
};

/// Scans `path` + "-wal" (the session FILE.db's log); present = false where there is none or it is
/// empty. Reads the file once; never writes; never throws (an unreadable file reads as not present).
WalScan scan_wal(const std::string& path);

/// One line for a WAL with unread bytes: "FILE.db-wal: 1.5 MB (367 frames) after its last valid
/// commit (byte 4515840 of 6021768) cannot be read (a checksum break in frame 1097 at byte ...)".
/// "" where unread_bytes == 0.
std::string describe_unread_wal(const std::string& path, const WalScan& scan);

/// A session its writer left in WAL mode (the run was SIGKILLed: FILE.db plus FILE.db-wal,
/// tester41 #11) checkpointed into FILE.db, which is then the whole session, in journal mode
/// DELETE (no -wal). Only where that is safe, else false with nothing changed: there is a
/// non-empty -wal; the metadata says ended = running and names this host as the writer's
/// (a writer on another host over a network file system cannot be checked); no live writer
/// holds it (its flock, or its pid alive: the check `--force-overwrite` makes); and the
/// writer's lock is then taken (flock LOCK_EX | LOCK_NB) for the checkpoint, so a writer that
/// started meanwhile makes it fail, not the other way round. Callers take turns: each holds an
/// flock(LOCK_EX) of FILE.db-wal (which SQLite never locks: no writer waits for it) from before
/// it opens anything of the session until it is done, so readers started together fold it
/// once, the first of them, and the others find no -wal. Another program with the file open
/// (the workbench, export) can make the checkpoint fail (SQLite waits 0.5 s): false, `why`
/// "another program has the session open (...)". `why` (optional) says why not.
/// The metadata is not changed (the session still reads "crashed"). Never throws.
/// A -wal with bytes SQLite cannot read (scan_wal's unread_bytes > 0: damaged, cut short, or an
/// uncommitted tail) is first copied to FILE.db-wal.damaged (FILE.db-wal.damaged.1, ... where that
/// exists), so the checkpoint, which keeps only the readable prefix, loses nothing; where the copy
/// fails, nothing is checkpointed (false). `scanned` (optional) gets the scan and `kept` (optional)
/// the copy's path ("" where none was made).
bool checkpoint_abandoned_session(const std::string& path, std::string* why = nullptr, WalScan* scanned = nullptr,
                                  std::string* kept = nullptr);

}  // namespace embedscope::sessions
