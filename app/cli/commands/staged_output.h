#pragma once
// A session written under a temporary name beside its final one and renamed over it only once
// it is complete (`import`, and the memory-snapshot import): an import that is cancelled
// (Ctrl-C), fails half-way or is killed never touches the session it was to replace, and no
// reader ever sees a half-written session under the final name (rename(2) is atomic within a
// directory).

#include <string>
#include <utility>
#include <vector>

#include "embedscope/sessions/store/session.h"

namespace embedscope::cli {

/// The staging of one output session. The temporary name is ".<out's name, at most 200 bytes of
/// it>.importing-<pid>" (`merge`: ".merging-<pid>") in the same directory (a process killed with
/// SIGKILL leaves it there; nothing else does: the next import, or merge, to the same `out`
/// removes such files, see the constructor).
class StagedSession {
 public:
  /// Checks `out` as SessionWriter would (throws SessionError naming it when it exists and
  /// `overwrite` is false, when it is not a regular file, or when a live writer holds it), makes
  /// its folder when missing (make_output_folder: engine::SpecError when it cannot) and chooses
  /// the temporary name. Creates no file; removes the
  /// staged files of earlier imports of `out` that were killed (their pid no longer runs on this
  /// host, and no SQLite connection holds the lock of their -shm or, where the -shm cannot tell,
  /// none of their files changed in the last minute), with their -wal / -shm / -journal.
  /// `command`: "import", "merge" or "launch" (its merge), named in the errors; the temporary
  /// name says "importing" for an import, else "merging".
  StagedSession(std::string out, bool overwrite, std::string command = "import");
  /// Removes the temporary file (and its SQLite companions) unless commit() ran.
  ~StagedSession();
  StagedSession(const StagedSession&) = delete;
  StagedSession& operator=(const StagedSession&) = delete;

  /// The name to write the session under (give it to SessionWriter with overwrite = true).
  const std::string& temp() const { return temp_; }
  /// The final name.
  const std::string& out() const { return out_; }
  /// After the writer closed the temporary session: checks `out` again (a live writer may
  /// have started meanwhile), removes the old session's -wal / -shm / -journal (they belong to
  /// the file being replaced and must never be applied to the new one) and renames the
  /// temporary file over `out`. Throws SessionError naming `out` when that fails (the
  /// temporary file is then removed and `out` kept).
  void commit();
  /// `text` (an error of the writer or the merge) with the temporary name replaced by the final
  /// one: the user asked for `out` and never heard of ".out.importing-PID" (tester61c F3).
  std::string as_out(std::string text) const;

 private:
  std::string out_, temp_, command_;
  bool overwrite_ = false, committed_ = false;
};

/// Runs f() and returns what it returns; a SessionWriteError or SessionError it throws is thrown
/// again (the same type) with the temporary name of `staged` replaced by the final one
/// (StagedSession::as_out): "ro/i.db: cannot create the session file: Read-only file system".
template <class F>
decltype(auto) with_out_name(const StagedSession& staged, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const sessions::SessionWriteError& e) {
    throw sessions::SessionWriteError(staged.as_out(e.what()));
  } catch (const sessions::SessionError& e) {
    throw sessions::SessionError(staged.as_out(e.what()));
  }
}

/// Throws SessionError when `out` is one of the files an import would read: one of `inputs`
/// as given or one of `files` (the inputs with directories expanded). Compared by identity
/// (same device and inode), so "./t.json" and "t.json" or a hard link are caught. Refused with
/// or without --force-overwrite: writing the session there would destroy the input.
void refuse_output_among_inputs(const std::string& out, const std::vector<std::string>& inputs,
                                const std::vector<std::string>& files);

}  // namespace embedscope::cli
