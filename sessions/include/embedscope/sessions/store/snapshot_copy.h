#pragma once
// A consistent copy of a session that its run is still writing: what a viewer opens so that every
// page it shows reads the same commits (the workbench's session tab, app/ui/shell/session_tab.h).

#include <string>

namespace embedscope::sessions {

/// Copies the session `source` into a new file `target` as one consistent snapshot: every commit
/// the source held at one instant (its -wal included), through SQLite's online backup API
/// (https://www.sqlite.org/backup.html, sqlite3_backup_step(-1): all pages inside one read
/// transaction of the source, so a writer committing meanwhile is not seen half-way). The source is
/// opened as every reader opens it (read-only, never making its writer fail: store/read_only_open.h).
/// The copy is a self-contained file (journal_mode DELETE, no -wal) whose metadata keeps the
/// source's `ended` but loses `writer_pid` and `writer_host`: a copy of a running session reads
/// status() "running" (what it was when copied), not "crashed" (no writer holds the copy).
/// `target` is replaced where it exists. Throws SessionError naming the file that failed
/// ("SRC: cannot open: ...", "TARGET: ... while copying a snapshot of SRC").
void copy_session_snapshot(const std::string& source, const std::string& target);

}  // namespace embedscope::sessions
