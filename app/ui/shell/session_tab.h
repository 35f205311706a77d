#pragma once
// One session's tab in the workbench: its pages (Timeline, Summary, Load, Memory) over one reader,
// a Reload that re-reads the file in place, and - for a session its run was still writing when
// the tab opened - one snapshot that every page reads, a banner that says so, and a watch on the
// file that says when the run has written more steps or ended.
//
// A file viewer's contract (Nsight Systems, Perfetto open a file as it is): every page of the tab
// shows the same commits. A session whose status() is "running" is therefore copied
// (sessions::copy_session_snapshot: one consistent snapshot, the -wal included) into a folder of
// the tab's own, and every page - and every analysis its pages run off the GUI thread, which open
// the file by path - reads the copy: "as of step N". Nothing reloads under the user's feet: a
// timer (1 s) compares the size and time of the file and its -wal with the last look and, where
// they changed, reads the file's status and steps off the GUI thread (AnalysisJob); the banner
// and the tab title then say "N more steps written" or "the run has ended", and F5 (File >
// Reload) re-reads it: same tab, same page, the timeline's view and selected range kept where
// they still exist.
//
// The copy runs on a worker (copy_job()), never on the GUI thread, which a multi-GB session
// froze: opening shows one page, "Copying a snapshot of live.db ... 37 %", until the copy is read;
// a reload keeps the pages it replaces, the banner saying "Reloading: copying a snapshot ...".
// Closing the tab or the window stops the copy within one part of it (16 MiB) and removes what
// it wrote (sessions::copy_session_snapshot's progress); the folder of the copies goes with the
// last of the tab and its workers.

#include <QString>
#include <QTabWidget>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

class QLabel;
class QTemporaryDir;
class QTimer;

namespace embedscope::sessions {
class SessionReader;
}

namespace embedscope::ui {

class AnalysisJob;

/// What a session's file held at one look: its status() and its step rows.
struct SessionFileState {
  std::string status;      ///< SessionReader::status(): "running", "complete", "crashed", ...
  int64_t steps = 0;       ///< distinct step numbers with a row in `steps` (warm-up steps included)
  int64_t measured = 0;    ///< of those, the measured steps (numbers >= 0; warm-up steps are negative)
  int64_t last_step = -1;  ///< the highest step number with a row (negative: still in warm-up)
};

/// The state of `session` (reads its steps table). Throws what the reader throws.
SessionFileState session_file_state(const sessions::SessionReader& session);

class SessionTab : public QTabWidget {
  Q_OBJECT

 public:
  /// Opens `path` (throws sessions::SessionError naming the file, as SessionReader does) and
  /// builds its pages: the Timeline at once, Summary, Load and Memory when first shown. A running
  /// session is read through a snapshot copy (see the top of this file), made off the GUI thread:
  /// until it is read the tab holds one page saying so (copying() is true, session() is null);
  /// a copy that fails leaves that page saying why (error()). A memory snapshot opens on its
  /// Memory page.
  explicit SessionTab(const QString& path, QWidget* parent = nullptr);
  /// Stops a snapshot copy still running; the worker removes what it wrote.
  ~SessionTab() override;

  /// The file as given (the tab's tooltip, File > Open Recent).
  const QString& path() const { return path_; }
  /// The reader every page reads: of the snapshot copy while snapshot() is true, else of path();
  /// null while the first snapshot is being copied (copying()) or when its copy failed (error()).
  const std::shared_ptr<const sessions::SessionReader>& session() const { return session_; }
  /// Whether a snapshot copy is running (opening, or reloading, a session still being written).
  bool copying() const;
  /// The job that copies the snapshot on a worker (wait_for_analyses waits for it too).
  AnalysisJob* copy_job() const { return copy_job_; }
  /// Why the last snapshot copy failed ("" when it did not): shown on the tab's page when the tab
  /// has no pages yet, in the banner after a reload.
  const QString& error() const { return error_; }
  /// The folder the snapshot copies go in ("" before the first copy): removed with the tab, or
  /// after it by the last copy still running.
  QString snapshot_folder() const;
  /// Whether the pages show a snapshot of a run that was still writing the file.
  bool snapshot() const { return snapshot_; }
  /// What the pages show (the snapshot's, or the file's when it was read).
  const SessionFileState& shown() const { return shown_; }
  /// What the file held at the last look (check_file); equal to shown() until then.
  const SessionFileState& latest() const { return latest_; }
  /// The tab title: the file name, its end in brackets when it did not complete ("s.db
  /// [cancelled]"), "[imported: FORMAT]", "[SIMULATED]"; for a snapshot (steps as the banner) "[running: as of step
  /// N]", then "[running: as of step N, +M: F5]" once the run wrote M more steps, and "[as of
  /// step N; run ended: F5]" once it ended; "[running: copying snapshot]" while the first copy
  /// runs ("[running: snapshot failed]" when it failed).
  QString title() const;
  /// The banner above the pages (the page bar's corner): hidden for a file that was not being
  /// written; else e.g. "As of step 39 (40 measured steps): the run was still writing this
  /// session. F5 reloads it.", "As of step 39: 67 more steps written since. F5 reloads them.",
  /// "As of step 39: the run has ended (complete, 500 measured steps). F5 reloads it." ("As of
  /// warm-up" while only warm-up steps were committed, "Before its first step" with none.)
  QLabel* banner() const { return banner_; }
  /// Re-reads the file in place (File > Reload, F5): a new snapshot while the run still writes,
  /// the file itself once it has ended. The page shown stays current, and the Timeline keeps its
  /// view and selected range, clamped to what the file now holds. On an error (the file is gone
  /// or damaged) the pages stay as they were and the error is returned. A new snapshot is
  /// copied off the GUI thread: reload() returns "" at once, the pages stay until the copy is
  /// read (copying(); the banner says "Reloading: ..."), and a copy that fails is said in the
  /// banner (error()). A reload while a copy runs replaces that copy.
  QString reload();
  /// Looks at the file now (what the timer does each second): where its size or time, or its
  /// -wal's, changed since the last look, its state is read off the GUI thread (watch_job());
  /// the banner and title follow when the result arrives. Does nothing when the tab is not a
  /// snapshot, or the run was seen to end.
  void check_file();
  AnalysisJob* watch_job() const { return watch_job_; }
  /// For a static image (a report's pages, --screenshot): stops looking at the file, so that every
  /// page says the same; the title and banner then say what the pages show and nothing of F5 or
  /// of steps written since: "[running: as of step N]", "As of step N (M measured steps): the run
  /// was still writing this session when this image was made." (tester60a F4: a report baked
  /// "F5 reloads them" into its PNGs, each page with another "+N"). A tab that is not a snapshot
  /// is unchanged.
  void freeze();
  bool frozen() const { return frozen_; }

 signals:
  /// title() changed (the watch saw new steps or the end of the run, or a reload).
  void title_changed(const QString& title);

 private:
  struct Copy;  // a snapshot copy in progress, shared with its worker
  struct Opened;  // what a worker read: the copy's reader and state
  // base_title_ from a reader of the file
  void set_base_title(const sessions::SessionReader& file);
  // starts copying a snapshot of the file on a worker; `look`: the file's look at the start
  void start_copy(const QString& look);
  // the pages of `session` in place of the tab's (the page shown, the timeline's view kept)
  void swap_in(std::shared_ptr<const sessions::SessionReader> session, bool snapshot, const SessionFileState& state,
               const QString& look);
  void show_copy_progress();
  void build_pages();
  void update_banner();
  QString path_;
  std::shared_ptr<const sessions::SessionReader> session_;
  bool snapshot_ = false;
  bool frozen_ = false;
  SessionFileState shown_, latest_;
  QString base_title_;  // the file name and its brackets, without the snapshot's
  QLabel* banner_;
  QTimer* timer_;
  AnalysisJob* watch_job_;
  AnalysisJob* copy_job_;
  QTimer* progress_timer_;  // the copy's progress, shown while it runs
  std::shared_ptr<Copy> copy_;  // the copy running (null when none)
  QString error_;
  std::shared_ptr<QTemporaryDir> snapshots_;  // the snapshot copies: the tab's, and each running copy's
  int generation_ = 0;
  QString last_look_;  // size and time of the file and its -wal at the last look
};

}  // namespace embedscope::ui
