#pragma once
// A headless report's files written under a staging folder and put in place at the end (tester49
// F13: SIGTERM during `embedscope-ui --report` killed it silently and left summary.png,
// timeline.png, ... without index.html, which then blocked the identical rerun; F4: on a full
// disk "libpng error: Write Error", "cannot write" without the reason, and a 0-byte PNG left).
//
// The pages go to DIR/.embedscope-report-PID/ (hidden: no report file name, so report_dir_refusal
// never sees it); commit() puts each into DIR with rename(2) (replacing an earlier report's page
// atomically) and removes the staging folder. SIGINT and SIGTERM - as the CLI's writing commands
// (app/cli/commands/cancel_writes.h) - cancel at once: the staging folder is removed (and DIR when
// this report created it), `report cancelled; nothing was written (DIR is as it was)` is printed,
// and the process exits 130. The cancel runs on a thread of its own (the handler only wakes it:
// sem_post is async-signal-safe) under the lock write() and commit() hold, so no staged file is
// created after the removal and a commit is never cut in half; after the commit a signal is too
// late and says so.

#include <QByteArray>
#include <QImage>
#include <QString>

#include <functional>

namespace embedscope::ui {

class ReportStaging {
 public:
  /// Creates `dir` (and its parents) when missing and the staging folder in it, installs the
  /// SIGINT / SIGTERM handling (once a process) and removes the staging folders of reports whose
  /// process is gone (killed with SIGKILL). `error()` says what could not be created ("" when
  /// all is well); then nothing else may be called but the destructor.
  explicit ReportStaging(const QString& dir);
  /// Removes the staging folder unless committed (a report that failed leaves nothing), and the
  /// folder `dir` when this created it and it is empty.
  ~ReportStaging();
  ReportStaging(const ReportStaging&) = delete;
  ReportStaging& operator=(const ReportStaging&) = delete;

  const QString& error() const { return error_; }

  /// Writes `bytes` as the staged `name` (a file name, no folder). "" or
  /// "DIR/NAME: cannot write: REASON" (REASON: strerror, e.g. "No space left on device"); a failed
  /// file is removed.
  QString write(const QString& name, const QByteArray& bytes);

  /// Puts the staged files in place: runs `before` (e.g. removing an earlier report's pages; its
  /// non-empty result is returned as the error, nothing put in place), then renames each staged
  /// file into DIR (index.html last) and removes the staging folder. "" or
  /// "DIR/NAME: cannot put in place: REASON".
  QString commit(const std::function<QString()>& before);

 private:
  QString dir_, staging_;
  QString error_;
  bool created_dir_ = false;
  bool committed_ = false;
};

/// Writes `bytes` to `path` through a hidden temporary file in its folder, renamed over `path`
/// when complete: a failed write leaves what was there and no partial file. "" or the reason,
/// strerror of the failed call ("No space left on device", "Permission denied", "File too
/// large"; retest49 R8: QSaveFile said "Unknown error" for a full disk). The new file's mode is
/// 0666 less the umask, as a file created by open(2).
QString write_file_in_place(const QString& path, const QByteArray& bytes);

/// `image` encoded as PNG in memory: the encoder never meets a write error (a full disk is
/// ReportStaging::write's, with its reason).
QByteArray png_bytes(const QImage& image);

}  // namespace embedscope::ui
