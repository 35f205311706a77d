#pragma once
// A consistent copy of a session that its run is still writing: what a viewer opens so that every
// page it shows reads the same commits (the workbench's session tab, app/ui/shell/session_tab.h).

#include <cstdint>
#include <functional>
#include <string>

namespace embedscope::sessions {

/// Called by copy_session_snapshot after each part of the copy: `copied_pages` of the snapshot's
/// `total_pages` pages are in the target. Returning false cancels the copy. Runs on the copying
/// thread.
using SnapshotProgress = std::function<bool(int64_t copied_pages, int64_t total_pages)>;

/// Copies the session `source` into a new file `target` as one consistent snapshot: every commit
/// the source held at one instant (its -wal included), through SQLite's online backup API
/// (https://www.sqlite.org/backup.html). One read transaction of the source is held from the
/// first page to the last, so a writer committing meanwhile is neither seen half-way nor makes
/// the copy start over, however many parts it is copied in. The source is opened as every reader
/// opens it (read-only, never making its writer fail: store/read_only_open.h).
/// The copy is a self-contained file (journal_mode DELETE, no -wal) whose metadata keeps the
/// source's `ended` but loses `writer_pid` and `writer_host`: a copy of a running session reads
/// status() "running" (what it was when copied), not "crashed" (no writer holds the copy).
/// `target` is replaced where it exists.
/// Without `progress` every page is copied in one backup step. With it, the pages are copied
/// `pages_per_step` at a time (at least 1; 1024 pages of a session's 16 KiB: 16 MiB), and
/// `progress` is called after each part; when it returns false the copy stops there, `target`
/// (and its -journal) is removed and the function returns false. Returns true when the copy is
/// complete. A copy that fails leaves no `target` either.
/// Throws SessionError naming the file that failed ("SRC: cannot open: ...", "TARGET: ... while
/// copying a snapshot of SRC").
bool copy_session_snapshot(const std::string& source, const std::string& target, const SnapshotProgress& progress = {},
                           int pages_per_step = 1024);

}  // namespace embedscope::sessions
