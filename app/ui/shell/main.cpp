// embedscope-ui: the Qt workbench.
// Usage: embedscope-ui [SESSION.db | TRACE ...]   (a trace is imported first, in the background)
//        embedscope-ui SESSION.db... --screenshot FILE.png   the window, rendered, then exit
//            [--page NAME] [--size WxH]                      (its page NAME, at W x H px; default
//                                                            the tab's first page at 1280x800)
//        embedscope-ui --report SESSION.db -o DIR            every view to DIR/*.png + index.html
//                                                            (a scaling study JSON: its one page)
//                                                            (the memory view with its Replay run and
//                                                            the largest block's details shown)
//        embedscope-ui --compare A.db B.db [...]            a comparison tab (traces imported first)
//        embedscope-ui --compare A.db B.db [...] --report -o DIR   every page of the comparison
//                                                            (Figures, Timelines, Memory) to DIR
//        embedscope-ui --scenario ID|FILE.json [--scenario-sessions DIR] [--screenshot FILE.png]
//                                                            a teaching scenario (its tab rendered)
//        embedscope-ui WORKLOAD.json [--screenshot FILE.png]   the workload in a designer tab
// --screenshot and --report work without a display (QT_QPA_PLATFORM=offscreen). Where no window
// can be seen (no DISPLAY, no WAYLAND_DISPLAY and QT_QPA_PLATFORM unset, or QT_QPA_PLATFORM
// offscreen / minimal), `embedscope-ui SESSION.db` writes the report of each session to
// SESSION-report/ beside it (`embedscope-ui SESSION.db -o DIR`: to DIR, one session) and says where.

#include <QApplication>
#include <QBuffer>
#include <QDir>
#include <QElapsedTimer>
#include <QLayout>
#include <QFile>
#include <QFileInfo>
#include <QImageReader>
#include <QImageWriter>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QHeaderView>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextStream>
#include <QThread>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "jobs/analysis_job.h"
#include "core/import_target.h"
#include "embedscope/engine/workload/output_folder.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/importers/importer.h"
#include "jobs/import_job.h"
#include "shell/main_window.h"
#include "shell/report_layout.h"
#include "shell/report_staging.h"
#include "shell/screenshot_options.h"
#include "shell/session_tab.h"
#include "timeline/step_box.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"
#include "views/workload_designer.h"
#include "views/compare_view.h"
#include "views/memory_view.h"
#include "views/scaling_view.h"

namespace {

int fail(const QString& msg) {
  std::fprintf(stderr, "error: %s\n", qPrintable(msg));
  return 2;
}

// Opens a session, or imports a trace / snapshot into one and opens that (MainWindow::open_path),
// waiting for the import: "" or what went wrong (the import's message for a trace that failed).
QString open_and_wait(embedscope::ui::MainWindow& w, const QString& path) {
  if (const QString err = w.open_path(path, true); !err.isEmpty()) return err;
  QString import_error;
  const auto c = QObject::connect(&w, &embedscope::ui::MainWindow::import_finished, &w,
                                  [&](const QString&, const QString& ended, const QString& msg) {
                                    if (ended != "complete") import_error = msg;
                                  });
  auto importing = [&] {
    for (auto* job : w.findChildren<embedscope::ui::ImportJob*>())
      if (job->running()) return true;
    return false;
  };
  while (importing()) {
    QApplication::processEvents();
    QThread::msleep(20);
  }
  QApplication::processEvents();
  QObject::disconnect(c);
  if (!import_error.isEmpty()) return import_error;
  // a session its run is still writing: its snapshot is copied in the background first
  if (auto* tab = qobject_cast<embedscope::ui::SessionTab*>(w.tabs()->currentWidget())) {
    while (tab->copying()) {
      QApplication::processEvents();
      QThread::msleep(20);
    }
    QApplication::processEvents();
    if (!tab->error().isEmpty()) return tab->error();
    tab->freeze();  // a static image: every page "as of step N", no F5 or "+N" (tester60a F4)
  }
  return {};
}

// wait_for_analyses for one page of a report, saying so on stderr when it takes more than a few
// seconds (tester46 F16: a 512-rank session's Load page was silent for 2 minutes) and when its
// figures were still being computed at the limit (the image then shows them in progress: before,
// nothing said so). True when every analysis of the page ended.
bool wait_for_page(QWidget* page, const QString& name) {
  constexpr int kQuietMs = 3000, kLimitMs = 120000;
  if (embedscope::ui::wait_for_analyses(page, kQuietMs)) return true;
  std::fprintf(stderr, "report: %s: still computing its figures after %d s ...\n", qPrintable(name), kQuietMs / 1000);
  QElapsedTimer clock;
  clock.start();
  if (embedscope::ui::wait_for_analyses(page, kLimitMs - kQuietMs)) {
    std::fprintf(stderr, "report: %s: figures done after %.0f s\n", qPrintable(name),
                 static_cast<double>(kQuietMs + clock.elapsed()) / 1000.0);
    return true;
  }
  std::fprintf(stderr, "note: %s: some figures were still being computed after %d s: the image shows them in progress\n",
               qPrintable(name), kLimitMs / 1000);
  return false;
}

// The files a report writes into its folder: index.html and one PNG per page of any report - a
// session's Timeline (and its slowest step, timeline-step.png), Summary, Load and Memory; a
// comparison's Figures, Timelines, Memory and Trade-offs; a scaling study's one page. A page added
// to a report must be named here (ReportDirR8 tests lists the files of each kind of report).
const QStringList& report_file_names() {
  static const QStringList names = {"index.html",  "timeline.png",  "timeline-step.png", "summary.png",
                                    "load.png",    "memory.png",    "figures.png",       "timelines.png",
                                    "trade-offs.png", "scaling.png"};
  return names;
}

// True when `dir`/index.html is an Embedscope report's (its title says so).
bool holds_earlier_report(const QString& dir) {
  QFile index(dir + "/index.html");
  return index.open(QIODevice::ReadOnly) && index.read(4096).contains("<title>Embedscope ");
}

// Why a report cannot be written into `dir`, or "" (tester45 F12.5: an existing folder's files were
// replaced without a word, where the CLI's outputs - export's csv folder, run's session - are
// replaced only with --force-overwrite). A folder takes the report unless a name the report writes
// (report_file_names) is taken there by something that is not an earlier Embedscope report: then
// only with `overwrite`, and the message names the files (retest47 R8: a folder holding only
// .gitignore, or the session itself, was refused though nothing would be replaced). A file is never
// a report folder.
QString report_dir_refusal(const QString& dir, bool overwrite) {
  const QFileInfo info(dir);
  if (!info.exists() && !info.isSymLink()) return "";
  if (!info.isDir())
    return dir + ": exists and is not a folder; a report is a folder of PNG pages and index.html (choose another -o)";
  if (overwrite || holds_earlier_report(dir)) return "";  // an earlier report: its pages are replaced
  QStringList taken;
  for (const QString& name : report_file_names()) {
    const QFileInfo f(dir + "/" + name);
    if (f.exists() || f.isSymLink()) taken << name;
  }
  if (taken.isEmpty()) return "";
  return QString("%1: the report would replace %2 there, and the folder holds no Embedscope report (no index.html "
                 "of one): choose another folder (-o), or allow replacing %3 (--force-overwrite)")
      .arg(dir, taken.join(", "), taken.size() == 1 ? "it" : "them");
}

// Removes the pages of an earlier Embedscope report in `dir` (the files its index.html shows that a
// report writes: report_file_names), so that a report written over another leaves none of the old
// one's pages that no page of the new one shows (retest47 R8: a comparison over a session's report
// left summary.png, load.png, ...). Nothing else is touched; "" or the file that could not be removed.
QString remove_earlier_report(const QString& dir) {
  if (!holds_earlier_report(dir)) return "";
  QFile index(dir + "/index.html");
  if (!index.open(QIODevice::ReadOnly)) return "";
  const QString html = QString::fromUtf8(index.readAll());
  static const QRegularExpression src("<img src=\"([^\"/\\\\]+)\"");
  for (auto it = src.globalMatch(html); it.hasNext();) {
    const QString name = it.next().captured(1);
    if (name == "index.html" || !report_file_names().contains(name)) continue;
    const QFileInfo f(dir + "/" + name);
    if (f.isFile() && !QFile::remove(f.filePath())) return f.filePath() + ": cannot remove the earlier report's page";
  }
  return "";
}

// Renders each page of the window's current tab (a session's views, or a comparison's pages) to
// DIR/<page>.png and writes DIR/index.html around them; `kind` heads the page ("report",
// "comparison").
int write_report(embedscope::ui::MainWindow& w, const QString& dir, const QString& kind) {
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->currentWidget());
  if (auto* cmp = qobject_cast<embedscope::ui::CompareView*>(w.tabs()->currentWidget())) views = cmp->pages();
  // a tab that is one page (a scaling study, tester44 F2: its report failed, leaving an empty folder)
  QWidget* single = views ? nullptr : qobject_cast<embedscope::ui::ScalingView*>(w.tabs()->currentWidget());
  if (!views && !single) return fail("the current tab has no pages to report");
  // the pages under a staging folder, put in place at the end; Ctrl-C / SIGTERM leave nothing
  // (tester49 F13), a write error says why and leaves no partial file (F4)
  embedscope::ui::ReportStaging staging(dir);
  if (!staging.error().isEmpty()) return fail(staging.error());
  const int pages = views ? views->count() : 1;
  auto page = [&](int i) { return views ? views->widget(i) : single; };
  auto page_name = [&](int i) { return views ? views->tabText(i) : QString("Scaling"); };
  w.resize(1600, 900);
  w.show();
  QString body;
  QStringList errors;  // what the views' analyses could not read: the report fails as `stats` does
  // a comparison's analysis job belongs to the CompareView, not to one of its pages: wait for it
  // (and take its errors) here, or a long session's Figures page is "Analysing ..." (tester39)
  if (QWidget* tab = w.tabs()->currentWidget(); views && tab != views) {
    embedscope::ui::wait_for_analyses(tab);
    QApplication::processEvents();
    errors << embedscope::ui::analysis_errors(tab);
  }
  for (int i = 0; i < pages; ++i) {
    if (views) views->setCurrentIndex(i);
    QApplication::processEvents();
    wait_for_page(page(i), page_name(i));  // the figures, not "Analysing ..."
    QApplication::processEvents();
    auto* memory = qobject_cast<embedscope::ui::MemoryView*>(page(i));
    if (!memory) memory = page(i)->findChild<embedscope::ui::MemoryView*>();  // inside a lazy tab
    if (memory) {
      memory->show_for_report();  // the replay and a block's details, which the window shows on clicks
      embedscope::ui::wait_for_analyses(memory);
      QApplication::processEvents();
    }
    for (const QString& e : embedscope::ui::analysis_errors(page(i)))
      if (!errors.contains(e)) errors << e;
    // every row of the scrolling panes (critical path, sharding plan, many ranks) on the image,
    // up to kReportMaxRows a pane; a pane held there is said on the image (its first rows shown)
    w.resize(1600, 900);
    if (auto* scaling = qobject_cast<embedscope::ui::ScalingView*>(page(i))) {
      // its table's rows (up to kReportMaxRows) added to the window, not shared with the plots: the
      // layout gave the table a fifth of each growth, and the plots grew to 1,400 px each
      QTableWidget* t = scaling->table();
      QApplication::processEvents();  // the columns at the window's width, then each row's wrapped note
      t->resizeRowsToContents();
      int rows_px = 0;
      for (int r = 0; r < std::min(t->rowCount(), embedscope::ui::kReportMaxRows); ++r) rows_px += t->rowHeight(r);
      const int full = rows_px + t->horizontalHeader()->height() + 2 * t->frameWidth() + 2;
      t->setMinimumHeight(full);
      w.resize(1600, 900 + full);
    }
    embedscope::ui::wrap_wide_labels(page(i));  // the width cap on every page (tester42 F19)
    embedscope::ui::show_every_row(&w, page(i));
    const QString note = embedscope::ui::cut_note(embedscope::ui::cut_panes(page(i)));
    if (!note.isEmpty()) std::fprintf(stderr, "note: %s: %s\n", qPrintable(page_name(i)), qPrintable(note));
    const QString name = page_name(i).toLower() + ".png";
    if (const QString err = staging.write(name, embedscope::ui::png_bytes(embedscope::ui::with_cut_note(
                                                     embedscope::ui::capped_width(w.grab().toImage()), note)));
        !err.isEmpty())
      return fail(err);
    embedscope::ui::release_held_panes(page(i));
    for (auto* l : w.findChildren<QLayout*>()) l->invalidate();  // the held heights out of every cached minimum
    w.setMinimumSize(0, 0);
    body += QString("<h2>%1</h2>\n<img src=\"%2\" alt=\"%1\">\n").arg(page_name(i), name);
    // the timeline again, fitted to the slowest measured step with its critical path drawn: what
    // keys 0..9 and P show in the window (tester43 F8)
    if (auto* tv = qobject_cast<embedscope::ui::TimelineView*>(page(i))) {
      // the step `stats` calls slowest (its step time max: per step the slowest rank's own), not the
      // widest window across ranks (tester54 F7)
      std::optional<int64_t> step;
      try {
        step = embedscope::ui::report_step(embedscope::sessions::analyze_step_times(*tv->session()), tv->timeline()->steps());
      } catch (const std::exception& e) {
        if (const QString err = QString::fromUtf8(e.what()); !errors.contains(err)) errors << err;
      }
      if (step) {
        tv->show_critical_path(true);
        embedscope::ui::wait_for_analyses(tv);
        QApplication::processEvents();
        tv->timeline()->fit_step(*step);
        w.resize(1600, 900);
        embedscope::ui::show_every_row(&w, tv);
        QApplication::processEvents();
        const QString step_name = "timeline-step.png";
        if (const QString err =
                staging.write(step_name, embedscope::ui::png_bytes(embedscope::ui::capped_width(w.grab().toImage())));
            !err.isEmpty())
          return fail(err);
        embedscope::ui::release_held_panes(tv);
        for (auto* l : w.findChildren<QLayout*>()) l->invalidate();
        w.setMinimumSize(0, 0);
        tv->show_critical_path(false);
        tv->timeline()->fit();
        body += QString("<h2>Timeline: %1 (the slowest measured step), critical path in magenta</h2>\n"
                        "<img src=\"%2\" alt=\"timeline of one step\">\n")
                    .arg(tv->step_box()->text().toHtmlEscaped(), step_name);
      }
    }
  }
  QString html;
  // the session's tab title: its file name with the window's marks ("[SIMULATED]", "[imported]")
  QString title = w.tabs()->tabText(w.tabs()->currentIndex()).toHtmlEscaped();
  if (title.startsWith("compare: ")) title = title.mid(9);  // "Embedscope comparison: a.db | b.db"
  QTextStream(&html) << "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Embedscope " << kind << ": " << title
                     << "</title>\n"
                     << "<style>body{font-family:sans-serif;margin:2em}img{max-width:100%;border:1px solid #ccc}</style>"
                     << "</head><body>\n<h1>Embedscope " << kind << ": " << title << "</h1>\n";
  if (!errors.isEmpty()) {  // what could not be read, above the pages that show what could (tester43 F10)
    QTextStream(&html) << "<p style=\"color:#b00020\"><b>Parts of this session could not be read:</b></p>\n<ul>\n";
    for (const QString& e : errors) QTextStream(&html) << "<li style=\"color:#b00020\">" << e.toHtmlEscaped() << "</li>\n";
    QTextStream(&html) << "</ul>\n";
  }
  QTextStream(&html) << body << "</body></html>\n";
  if (const QString err = staging.write("index.html", html.toUtf8()); !err.isEmpty()) return fail(err);
  // an earlier report's pages go only now, with the new ones put in place
  if (const QString err = staging.commit([&] { return remove_earlier_report(dir); }); !err.isEmpty()) return fail(err);
  if (errors.isEmpty()) {
    std::fprintf(stderr, "wrote %s/index.html\n", qPrintable(dir));
    return 0;
  }
  // exit 2, as the CLI for the same file; the pages show what could be read, so the report stays
  // (tester43 F10: "wrote ..." and then the errors read as a report that worked)
  return fail(QString("the report %1/index.html is incomplete: %2 part%3 of the session could not be read:\nerror: %4")
                  .arg(dir)
                  .arg(errors.size())
                  .arg(errors.size() == 1 ? "" : "s")
                  .arg(errors.join("\nerror: ")));
}

// The session that opening `p` imports it into (import_target, as MainWindow::open_path imports:
// <stem>.db beside it, or the cache folder; an earlier import of the same unchanged files is
// reused): for a trace, a memory snapshot, an Nsight export or a folder of traces; none for a
// session (.db, or an SQLite file that is not an Nsight export) or anything not there.
// `error`: what import_target refused, naming `p`.
std::optional<embedscope::ui::ImportTarget> import_target_of(const QString& p, QString& error) {
  const QFileInfo info(p);
  if (!info.isDir()) {  // a folder of per-rank traces is imported as one job, as opening it does
    if (!info.isFile() || info.suffix().compare("db", Qt::CaseInsensitive) == 0) return std::nullopt;
    if (embedscope::sessions::importers::read_head(p.toStdString(), 16) == std::string("SQLite format 3\0", 16) &&
        !embedscope::ui::is_nsys_export(p.toStdString()))
      return std::nullopt;  // a session (an Nsight Systems export is imported)
    // a scaling study or a workload opens on a page of its own, not imported (the report of a
    // study said "importing s.json into s.db" and wrote no s.db)
    if (embedscope::ui::is_scaling_study_file(p) || embedscope::ui::is_workload_file(p)) return std::nullopt;
  }
  try {
    return embedscope::ui::import_target({p.toStdString()}, embedscope::ui::MainWindow::imports_folder().toStdString());
  } catch (const std::exception& e) {
    error = p + ": " + QString::fromUtf8(e.what());
    return std::nullopt;
  }
}

// import_target_of, saying a new import on stderr, "WHO: importing P into Y" (tester48 F10:
// --report wrote TRACE-N.db beside the trace without a word, where --compare said it).
std::optional<embedscope::ui::ImportTarget> announce_import(const QString& p, const char* who, QString& error) {
  auto target = import_target_of(p, error);
  if (target && !target->reuse) std::fprintf(stderr, "%s: importing %s into %s\n", who, qPrintable(p), target->path.c_str());
  return target;
}

// The report of one session (a trace given is imported first, said on stderr): write_report of its tab.
int report(embedscope::ui::MainWindow& w, const QString& session, const QString& dir, bool overwrite) {
  if (const QString err = report_dir_refusal(dir, overwrite); !err.isEmpty()) return fail(err);  // before any work
  QString import_error;
  announce_import(session, "report", import_error);
  if (!import_error.isEmpty()) return fail(import_error);
  if (const QString err = open_and_wait(w, session); !err.isEmpty()) return fail(err);
  if (w.tabs()->count() == 0) return fail(session + ": nothing was opened");
  return write_report(w, dir, "report");
}

// --compare given a trace, a memory snapshot (tester37 #20) or a folder of traces (tester39): each
// is imported first, as opening it does (announce_import), waiting for the import, and its session
// takes its place in `paths`. "" or what went wrong (naming the file). Anything else that is not an
// existing non-.db file is left as it is (open_compare says what is wrong with it).
QString import_traces_to_compare(embedscope::ui::MainWindow& w, QStringList& paths) {
  for (QString& p : paths) {
    const QFileInfo info(p);
    // files that open on a page of their own, not as a session (tester45 F12.12: "importing
    // sc.json into sc.db", then "sc.db: cannot open")
    if (info.isFile() && embedscope::ui::is_scaling_study_file(p))
      return p + ": a scaling study (embedscope scaling --json), not a session: it opens on its own page "
                 "(embedscope-ui " + p + "); --compare compares sessions and traces";
    if (info.isFile() && embedscope::ui::is_workload_file(p))
      return p + ": a workload, not a session: run it (embedscope run " + p + ") and compare its session";
    QString error;
    const auto target = announce_import(p, "--compare", error);
    if (!error.isEmpty()) return error;
    if (!target) continue;
    if (!target->reuse) {
      const int tabs_before = w.tabs()->count();
      if (const QString err = open_and_wait(w, p); !err.isEmpty()) return err;
      // the imported session's own tab goes: the comparison is what was asked for (tester63a F11:
      // a stray "nccl_data.db [imported: kineto_json]" tab beside it on the report's images)
      while (w.tabs()->count() > tabs_before) delete w.tabs()->widget(w.tabs()->count() - 1);
    }
    p = QString::fromStdString(target->path);
  }
  return {};
}

// The report of a comparison (tester38 #15): every page of the compare tab (Figures, Timelines,
// Memory) as DIR/<page>.png and DIR/index.html, as a session's report.
int compare_report(embedscope::ui::MainWindow& w, QStringList sessions, const QString& dir, bool overwrite) {
  if (const QString err = report_dir_refusal(dir, overwrite); !err.isEmpty()) return fail(err);  // before any work
  if (const QString err = import_traces_to_compare(w, sessions); !err.isEmpty()) return fail("--compare: " + err);
  if (const QString err = w.open_compare(sessions, true); !err.isEmpty()) return fail("--compare: " + err);
  if (!qobject_cast<embedscope::ui::CompareView*>(w.tabs()->currentWidget())) return fail("--compare: nothing was opened");
  return write_report(w, dir, "comparison");
}

// Qt's offscreen platform warns about window features it lacks; rendering to files needs none.
void quiet_offscreen(QtMsgType type, const QMessageLogContext& context, const QString& msg) {
  if (msg.contains("does not support propagateSizeHints") || msg.startsWith("QStandardPaths: XDG_RUNTIME_DIR not set"))
    return;
  std::fprintf(stderr, "%s\n", qPrintable(qFormatLogMessage(type, context, msg)));
}

// No display to show a window on: neither X11 nor Wayland, and no platform chosen.
// Why no window can be seen, or "" where one can: no display at all, or a platform that draws
// nothing (tester41 #12: QT_QPA_PLATFORM=offscreen, as CI jobs set it, opened an invisible window
// and ran until killed).
QString no_display() {
  const QByteArray platform = qgetenv("QT_QPA_PLATFORM");
  if (platform == "offscreen" || platform == "minimal") return "QT_QPA_PLATFORM=" + QString(platform) + " shows no window";
  if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") && platform.isEmpty())
    return "no display (DISPLAY and WAYLAND_DISPLAY are unset)";
  return "";
}

// Where the report of `input` goes without -o (headless_report_folder): "runs/criteo.db" ->
// "runs/criteo-report"; a trace's beside its imported session ("t.json.gz" -> "t-report"), so a
// read-only data folder gets nothing (tester63a F1); a session in a folder that is not writable: the
// current folder's. `why` says where and why when not beside the input.
QString report_dir_of(const QString& input, QString& why) {
  QString ignored;  // import_target's refusal is the report's to say
  const auto target = import_target_of(input, ignored);
  const auto folder = embedscope::ui::headless_report_folder(
      input.toStdString(), target ? target->path : std::string(), QDir::currentPath().toStdString(),
      (QStandardPaths::writableLocation(QStandardPaths::CacheLocation) + "/reports").toStdString());
  why = QString::fromStdString(folder.why);
  return QString::fromStdString(folder.path);
}

}  // namespace

namespace {
// Why `path` cannot take the screenshot, or "" (tester37 D0: a name without an image type failed
// only after QImage::save had opened - and emptied - the file, even the session being shown).
// Checked before anything is opened: the name must end in an image type Qt writes, must not be one
// of `sessions`, and an existing file there must be an image (a session or a trace is never
// overwritten).
QString screenshot_target_error(const QString& path, const QStringList& sessions) {
  const QByteArray suffix = QFileInfo(path).suffix().toLower().toUtf8();
  if (suffix.isEmpty() || !QImageWriter::supportedImageFormats().contains(suffix))
    return path + ": not written: the name must end in an image type, e.g. .png";
  const QFileInfo target(path);
  for (const QString& s : sessions)
    if (target.exists() && QFileInfo(s).exists() && target.canonicalFilePath() == QFileInfo(s).canonicalFilePath())
      return path + ": not written: it is one of the sessions shown";
  if (target.exists() && QImageReader::imageFormat(path).isEmpty())
    return path + ": not written: the file exists and is not an image (a screenshot never replaces other files)";
  return {};
}

// Writes `image` to `path` through a temporary file renamed over it when complete
// (write_file_in_place): a failed write leaves what was there. "" or the reason (strerror: "No
// space left on device"; tester49 F4, retest49 R8). Encoded in memory first, so the image encoder
// meets no write error.
QString save_screenshot(const QImage& image, const QString& path) {
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  if (!image.save(&buffer, QFileInfo(path).suffix().toLower().toUtf8().constData())) return "the image cannot be encoded";
  return embedscope::ui::write_file_in_place(path, bytes);
}
}  // namespace

int main(int argc, char** argv) {
  bool batch_mode = false;
  const QString no_window = no_display();
  const bool headless = !no_window.isEmpty();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: embedscope-ui [SESSION.db | TRACE | SNAPSHOT.pickle ...]\n"
                  "                                                     open sessions in the workbench (a trace or\n"
                  "                                                     memory snapshot is imported first); none: the\n"
                  "                                                     start page (open, new workload, compare, the\n"
                  "                                                     teaching scenarios, recent files)\n"
                  "       embedscope-ui [SESSION.db...] --screenshot FILE.png [--page NAME] [--size WxH]\n"
                  "                                                     the window as an image (no session: the start\n"
                  "                                                     page): page NAME of the tab at W x H px\n"
                  "                                                     (default: its first page, 1280x800). Pages:\n"
                  "                                                     a session's Timeline, Summary, Load, Memory;\n"
                  "                                                     a comparison's or scenario's Figures,\n"
                  "                                                     Timelines, Memory (and a storage scenario's\n"
                  "                                                     Trade-offs); a scaling study and a workload\n"
                  "                                                     designer are one page each\n"
                  "       embedscope-ui --report SESSION.db -o DIR [--force-overwrite]\n"
                  "                                                     every view as PNG + index.html (an earlier\n"
                  "                                                     report's pages are replaced; other files of\n"
                  "                                                     those names only with --force-overwrite)\n"
                  "       embedscope-ui --compare A.db B.db [...]       compare sessions side by side (a trace or memory\n"
                  "                                                      snapshot given is imported first)\n"
                  "       embedscope-ui --compare A.db B.db --report -o DIR   every compare page as PNG + index.html\n"
                  "       embedscope-ui --scenario ID|FILE.json [--scenario-sessions DIR] [--screenshot FILE.png]\n"
                  "                                                     a teaching scenario (sessions DIR/ID-0.db, ...);\n"
                  "                                                     --screenshot renders its tab (no display needed)\n"
                  "       embedscope-ui WORKLOAD.json [--screenshot FILE.png]   the workload in a designer\n"
                  "(--screenshot and --report need no display; without any display,\n"
                  " embedscope-ui SESSION.db [-o DIR] writes the report to SESSION-report/ or DIR)\n");
      return 0;
    }
    batch_mode |= a == "--report" || a == "--screenshot";
  }
  // rendering to files needs no display: use the offscreen platform unless one was chosen
  if ((batch_mode || headless) && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  // its warnings are noise also where the user chose offscreen (tester40 #14: 7-10 lines a report)
  if (qgetenv("QT_QPA_PLATFORM") == "offscreen") qInstallMessageHandler(quiet_offscreen);
  QApplication app(argc, argv);
  QApplication::setApplicationName("Embedscope");
  QApplication::setOrganizationName("Embedscope");
  embedscope::ui::MainWindow w;
  QString screenshot, report_session, report_dir, scenario, scenario_sessions, page;
  std::optional<QSize> size;
  QStringList sessions;
  bool compare = false, report_flag = false, overwrite = false;
  const QStringList args = QApplication::arguments().mid(1);
  for (int i = 0; i < args.size(); ++i) {
    const QString& a = args[i];
    // the value of an option: the next argument, unless it is missing or another option
    auto value = [&]() -> QString {
      return i + 1 < args.size() && !args[i + 1].startsWith("-") ? args[++i] : QString();
    };
    if (a == "--screenshot") {
      if ((screenshot = value()).isEmpty()) return fail("--screenshot needs a file name");
    } else if (a == "--page") {
      if ((page = value()).isEmpty()) return fail("--page needs a page name (Timeline, Summary, Load, Memory, ...)");
    } else if (a == "--size") {
      const QString v = value();
      if (v.isEmpty()) return fail("--size needs a window size, WIDTHxHEIGHT, e.g. --size 1280x800");
      if (!(size = embedscope::ui::parse_window_size(v)))
        return fail("--size " + v + ": not a window size; give WIDTHxHEIGHT in px, 200 to 10000 each, e.g. 1280x800");
    } else if (a == "--report") {
      report_flag = true;  // its session: the next argument, or (with --compare) the sessions compared
      report_session = value();
    } else if (a == "--compare") {
      compare = true;
    } else if (a == "--scenario") {
      if ((scenario = value()).isEmpty()) return fail("--scenario needs a scenario id or file");
    } else if (a == "--scenario-sessions") {
      if ((scenario_sessions = value()).isEmpty()) return fail("--scenario-sessions needs a folder");
    } else if (a == "-o") {
      if ((report_dir = value()).isEmpty()) return fail("-o needs a folder");
    } else if (a == "--force-overwrite") {  // a report's -o folder that holds other files
      overwrite = true;
    } else if (a.startsWith("-")) {
      return fail("unknown option " + a + " (see embedscope-ui --help)");
    } else {
      sessions << a;
    }
  }
  // the page and size of a screenshot; a report renders every page at its own size
  if ((!page.isEmpty() || size) && screenshot.isEmpty())
    return fail(QString("%1 goes with --screenshot FILE.png (a report renders every page, 1600 px wide)")
                    .arg(!page.isEmpty() ? "--page" : "--size"));
  // two outputs of one run: the screenshot was ignored beside a report (tester48 F14.11)
  if (report_flag && !screenshot.isEmpty())
    return fail(QString("--screenshot %1 and --report write different outputs (one window image; every page as PNG + "
                        "index.html): give one of them")
                    .arg(screenshot));
  if (report_flag && compare) {
    if (report_dir.isEmpty()) return fail("--compare --report needs -o DIR");
    if (!report_session.isEmpty()) sessions.prepend(report_session);
    if (sessions.size() < 2) return fail("--compare --report needs two or more session files");
    return compare_report(w, sessions, report_dir, overwrite);
  }
  // a scenario has no report of its own (tester42 F15: "--report needs a session file" said nothing
  // of it): say what writes its pages instead
  if (report_flag && !scenario.isEmpty())
    return fail(QString("--report writes the pages of one session (or of --compare), not a scenario's; render the "
                        "scenario's tab with --screenshot FILE.png (embedscope-ui --scenario %1%2 --screenshot "
                        "FILE.png), or write the comparison of its runs as a report (embedscope-ui --compare "
                        "%3-0.db %3-1.db ... --report -o DIR)")
                    .arg(scenario, scenario_sessions.isEmpty() ? QString() : " --scenario-sessions " + scenario_sessions,
                         (scenario_sessions.isEmpty() ? QString() : scenario_sessions + "/") +
                             (scenario.endsWith(".json") || scenario.contains('/') ? QString("ID") : scenario)));
  if (report_flag && report_session.isEmpty()) {
    if (sessions.size() != 1) return fail("--report needs a session file");
    report_session = sessions.takeFirst();  // `--report -o DIR SESSION.db`
  }
  if (!report_session.isEmpty()) {
    if (report_dir.isEmpty()) return fail("--report needs -o DIR");
    if (!sessions.isEmpty()) return fail("--report takes one session; also given: " + sessions.join(", "));
    return report(w, report_session, report_dir, overwrite);
  }
  if (!scenario_sessions.isEmpty() && scenario.isEmpty()) return fail("--scenario-sessions goes with --scenario");
  const bool batch = !screenshot.isEmpty();
  if (batch)
    if (const QString why = screenshot_target_error(screenshot, sessions); !why.isEmpty()) return fail(why);
  // one session is no comparison, with or without a display (tester43 F19: "needs a window" first)
  if (compare && sessions.size() < 2)
    return fail(QString("--compare needs two or more session files; given %1")
                    .arg(sessions.isEmpty() ? QString("none") : QString("only %1").arg(sessions.front())));
  if (headless && !batch && (compare || !scenario.isEmpty()))  // a report has no comparison or scenario page
    return fail(compare ? QString("%1: --compare needs a window; add --report -o DIR to write the comparison's report "
                                  "(PNGs and an index.html), --screenshot FILE.png to render it, or run where there is a "
                                  "display")
                              .arg(no_window)
                        : QString("%1: --scenario needs a window; add --screenshot FILE.png to render it (with "
                                  "--scenario-sessions DIR for the sessions `embedscope scenario NAME -o DIR` wrote), or "
                                  "run where there is a display")
                              .arg(no_window));
  if (headless && !batch) {  // nowhere to show the window: write what it would show
    if (sessions.isEmpty())
      return fail(no_window + ": give a session to write its report (embedscope-ui SESSION.db), or run where there "
                  "is a display");
    // -o DIR: the report's folder, as for --report (retest47 R11: it was ignored); one session's
    if (!report_dir.isEmpty() && sessions.size() > 1)
      return fail(QString("-o %1 is the report folder of one session; given %2 sessions: leave -o out (each report "
                          "goes to SESSION-report/ beside its session) or write each with embedscope-ui --report "
                          "SESSION.db -o DIR")
                      .arg(report_dir)
                      .arg(sessions.size()));
    for (const QString& s : sessions) {
      if (embedscope::ui::is_workload_file(s))  // a designer, not a session: it has no report (tester43 F8)
        return fail(QString("%1: a workload: it opens in a designer, which needs a window; render it with "
                            "embedscope-ui %1 --screenshot FILE.png")
                        .arg(s));
      if (const QString err = embedscope::ui::broken_workload_json_error(s); !err.isEmpty()) return fail(err);  // tester47 F8
      QString why;
      const QString dir = report_dir.isEmpty() ? report_dir_of(s, why) : report_dir;
      if (const int rc = report(w, s, dir, overwrite); rc != 0) return rc;
      std::printf("%s: the report of %s is in %s/index.html (open it in a browser)%s\n",
                  qPrintable(no_window.section(" (", 0, 0)), qPrintable(s), qPrintable(dir),
                  qPrintable(why.isEmpty() ? QString() : "; " + why));
    }
    return 0;
  }
  // -o names a report's folder; a window or a screenshot has none (it was ignored without a word)
  if (!report_dir.isEmpty())
    return fail(QString("-o %1: -o is the folder of a report (embedscope-ui --report SESSION.db -o DIR, or "
                        "--compare A.db B.db --report -o DIR)%2")
                    .arg(report_dir, batch ? "; --screenshot writes FILE.png" : ""));
  if (compare) {
    if (const QString err = import_traces_to_compare(w, sessions); !err.isEmpty()) return fail("--compare: " + err);
    if (const QString err = w.open_compare(sessions, batch); batch && !err.isEmpty()) return fail("--compare: " + err);
  } else {
    for (const QString& s : sessions) {  // sessions, or traces imported first (batch: the imports' sessions, not their progress bars)
      if (!batch) {
        w.open_path(s, false);
      } else if (const QString err = open_and_wait(w, s); !err.isEmpty()) {
        return fail(err);
      }
    }
  }
  if (!scenario.isEmpty()) {
    if (const QString err = w.open_scenario(scenario, scenario_sessions, batch); batch && !err.isEmpty())
      return fail(err);
  }
  if (!page.isEmpty())
    if (const QString err = embedscope::ui::show_page(w, page); !err.isEmpty()) return fail(err);
  if (size) w.resize(*size);
  w.show();
  if (batch) {
    QApplication::processEvents();
    embedscope::ui::wait_for_analyses(&w);  // what the analyses found, not "computing ..."
    QApplication::processEvents();
    embedscope::ui::finish_shown_memory_pages(&w);  // a Memory page's replay rows, as --report shows them
    try {  // shots/a.png in an empty folder makes shots/, as `embedscope run -o` makes its folder
      embedscope::engine::make_output_folder(screenshot.toStdString(), "--screenshot");
    } catch (const embedscope::engine::SpecError& e) {
      return fail(QString::fromStdString(e.what()));
    }
    if (const QString why = save_screenshot(w.grab().toImage(), screenshot); !why.isEmpty())
      return fail(screenshot + ": cannot write the screenshot: " + why);
    return 0;
  }
  return QApplication::exec();
}
