#include "shell/session_tab.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QEvent>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QProgressBar>
#include <QSignalBlocker>
#include <QTemporaryDir>
#include <QTimer>
#include <QVBoxLayout>

#include <atomic>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <optional>
#include <set>

#include "core/empty_pages.h"
#include "core/timeline_math.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"  // format_bytes
#include "embedscope/sessions/store/session.h"
#include "embedscope/sessions/store/snapshot_copy.h"
#include "jobs/analysis_job.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"
#include "views/load_view.h"
#include "views/memory_view.h"
#include "views/summary_view.h"

namespace embedscope::ui {

namespace {
// A page whose content is built when it is first shown, so that opening a big session reads only
// what the timeline needs; a damaged file's error shows in the page.
void add_lazy_tab(QTabWidget* page, const QString& title, std::function<QWidget*(QWidget*)> build) {
  auto* holder = new QWidget(page);
  auto* layout = new QVBoxLayout(holder);
  layout->setContentsMargins(0, 0, 0, 0);
  const int index = page->addTab(holder, title);
  QObject::connect(page, &QTabWidget::currentChanged, holder, [holder, layout, index, build](int i) {
    if (i != index || layout->count() > 0) return;
    try {
      layout->addWidget(build(holder));
    } catch (const std::exception& e) {
      auto* label = new QLabel(QString::fromUtf8(e.what()), holder);
      label->setWordWrap(true);
      layout->addWidget(label);
    }
  });
}

// A page with nothing to draw (core/empty_pages.h): the reason, in place of empty charts.
QWidget* empty_page(const std::string& why, QWidget* parent) {
  auto* label = new QLabel(QString::fromStdString(why), parent);
  label->setObjectName("empty_page_reason");
  label->setWordWrap(true);
  label->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  label->setMargin(16);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  return label;
}

// "as of step 39", or before any step was committed
QString as_of(const SessionFileState& s) {
  if (s.steps == 0) return "before its first step";
  return s.last_step < 0 ? QString("as of warm-up") : QString("as of step %1").arg(s.last_step);
}

// size and time of the file and of its -wal: what a commit changes (the -wal grows, or is
// rewritten after a checkpoint; the writer's close removes it)
QString file_look(const QString& path) {
  const QFileInfo db(path), wal(path + "-wal");
  return QString("%1 %2 %3 %4")
      .arg(db.size())
      .arg(db.lastModified().toMSecsSinceEpoch())
      .arg(wal.exists() ? wal.size() : -1)
      .arg(wal.exists() ? wal.lastModified().toMSecsSinceEpoch() : 0);
}
}  // namespace

SessionFileState session_file_state(const sessions::SessionReader& session) {
  SessionFileState s;
  s.status = session.status();
  std::set<int64_t> steps;
  for (const auto& m : session.steps()) steps.insert(m.step);
  s.steps = static_cast<int64_t>(steps.size());
  s.measured = static_cast<int64_t>(std::distance(steps.lower_bound(0), steps.end()));
  s.last_step = steps.empty() ? -1 : *steps.rbegin();
  return s;
}

// A snapshot copy running on a worker: its progress and its stop, shared with the worker.
struct SessionTab::Copy {
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> copied_pages{0}, total_pages{0};
  int64_t bytes = 0;  // the file and its -wal when the copy started: what the page says it copies
  QString look;       // file_look at the start
};

// What the worker read: a reader of the finished copy and its state.
struct SessionTab::Opened {
  std::shared_ptr<const sessions::SessionReader> reader;
  SessionFileState state;
};

SessionTab::SessionTab(const QString& path, QWidget* parent)
    : QTabWidget(parent), path_(path), banner_(new QLabel(this)), timer_(new QTimer(this)),
      watch_job_(new AnalysisJob(this)), copy_job_(new AnalysisJob(this)), progress_timer_(new QTimer(this)) {
  banner_->setObjectName("live_banner");
  banner_->setStyleSheet("QLabel { background: #fff1b8; color: #3d3000; padding: 2px 8px; }");
  banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  banner_->hide();
  setCornerWidget(banner_, Qt::TopRightCorner);
  connect(timer_, &QTimer::timeout, this, &SessionTab::check_file);
  connect(progress_timer_, &QTimer::timeout, this, &SessionTab::show_copy_progress);
  const QString look = file_look(path_);
  last_look_ = look;
  auto file = std::make_shared<const sessions::SessionReader>(path_.toStdString());
  set_base_title(*file);
  if (file->status() == "running") {  // still being written: every page reads one copy, made on a worker
    snapshot_ = true;
    auto* page = new QWidget(this);
    auto* layout = new QVBoxLayout(page);
    auto* label = new QLabel(page);
    label->setObjectName("snapshot_copy_status");
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* bar = new QProgressBar(page);
    bar->setObjectName("snapshot_copy_progress");
    bar->setRange(0, 1000);
    layout->addWidget(label);
    layout->addWidget(bar);
    layout->addStretch(1);
    addTab(page, "Copying snapshot");
    start_copy(look);
    return;
  }
  session_ = std::move(file);
  shown_ = latest_ = session_file_state(*session_);
  build_pages();
  // a memory snapshot has nothing but its Memory page: open there (tester43 F14), not on the
  // Timeline's sentence (the tabs stay, the sentence says why the Timeline is empty)
  if (!timeline_page_empty_reason(*session_).empty() && memory_page_empty_reason(*session_).empty())
    setCurrentIndex(count() - 1);
  update_banner();
}

SessionTab::~SessionTab() {
  if (copy_) copy_->cancel = true;  // the worker stops within a part and removes what it wrote
}

bool SessionTab::copying() const { return copy_ != nullptr; }

QString SessionTab::snapshot_folder() const { return snapshots_ ? snapshots_->path() : QString(); }

void SessionTab::set_base_title(const sessions::SessionReader& file) {
  QString title = QFileInfo(path_).fileName();
  if (const std::string ended = file.status(); ended != "complete" && ended != "running")
    title += QString(" [%1]").arg(QString::fromStdString(ended));
  if (file.meta(sessions::meta::kImported) == "1")
    title += QString(" [imported: %1]").arg(QString::fromStdString(file.meta(sessions::meta::kImportFormat)));
  if (file.meta(sessions::meta::kSimulated) == "1") title += " [SIMULATED]";  // timed by a cost model
  base_title_ = title;
}

void SessionTab::start_copy(const QString& look) {
  if (copy_) copy_->cancel = true;  // a reload during a copy: that copy stops (its result is stale)
  error_.clear();
  if (!snapshots_) snapshots_ = std::make_shared<QTemporaryDir>(QDir::tempPath() + "/embedscope-snapshot-XXXXXX");
  auto fail = [this](const QString& why) {
    copy_.reset();
    copy_job_->cancel();
    error_ = why;
    show_copy_progress();
    update_banner();
  };
  if (!snapshots_->isValid())
    return fail(path_ + ": cannot make a folder for its snapshot (" + snapshots_->errorString() + ")");
  const QString folder = snapshots_->filePath(QString::number(++generation_));
  if (!QDir().mkpath(folder)) return fail(folder + ": cannot make a folder for the snapshot of " + path_);
  copy_ = std::make_shared<Copy>();
  copy_->look = look;
  copy_->bytes = QFileInfo(path_).size() + std::max<qint64>(0, QFileInfo(path_ + "-wal").size());
  const QString target = folder + "/" + QFileInfo(path_).fileName();  // pages that name the file name it
  copy_job_->start<Opened>(
      // `dir` keeps the copies' folder while this worker writes in it (the tab may close meanwhile)
      [copy = copy_, dir = snapshots_, source = path_.toStdString(), target = target.toStdString(), folder] {
        try {
          const bool done = sessions::copy_session_snapshot(source, target, [&copy](int64_t copied, int64_t total) {
            copy->copied_pages = copied;
            copy->total_pages = total;
            return !copy->cancel.load();
          });
          if (!done) throw std::runtime_error("cancelled");  // stale: never shown
          Opened out;
          out.reader = std::make_shared<const sessions::SessionReader>(target);
          out.state = session_file_state(*out.reader);
          return out;
        } catch (...) {
          QDir(folder).removeRecursively();  // no half copy left behind
          throw;
        }
      },
      [this](Opened& opened) {
        const QString started = copy_->look;
        copy_.reset();
        progress_timer_->stop();
        swap_in(std::move(opened.reader), true, opened.state, started);
      },
      [fail](const QString& why) { fail(why); });
  show_copy_progress();
  progress_timer_->start(200);
  update_banner();
}

void SessionTab::show_copy_progress() {
  if (!copy_) progress_timer_->stop();
  QString text;
  int permille = 0;
  if (copy_) {
    const int64_t total = copy_->total_pages, copied = copy_->copied_pages;
    permille = total > 0 ? static_cast<int>(copied * 1000 / total) : 0;
    text = QString("Copying a snapshot of %1 (%2; the run is still writing it)... %3 %")
               .arg(QFileInfo(path_).fileName(), QString::fromStdString(sessions::format_bytes(copy_->bytes)))
               .arg(permille / 10);
  } else if (!error_.isEmpty()) {
    text = "Cannot open a snapshot of the session: " + error_;
  }
  if (session_) {  // a reload: the pages stay, the banner says it
    update_banner();
    return;
  }
  if (auto* label = findChild<QLabel*>("snapshot_copy_status")) label->setText(text);
  if (auto* bar = findChild<QProgressBar*>("snapshot_copy_progress")) {
    bar->setValue(permille);
    bar->setVisible(copy_ != nullptr);
  }
  emit title_changed(title());
}

void SessionTab::build_pages() {
  const auto session = session_;
  if (const std::string why = timeline_page_empty_reason(*session); !why.empty())
    addTab(empty_page(why, this), "Timeline");  // a memory snapshot: no ops, not an empty axis
  else
    addTab(new TimelineView(session, this), "Timeline");
  add_lazy_tab(this, "Summary", [session](QWidget* parent) { return new SummaryView(session, parent); });
  add_lazy_tab(this, "Load", [session](QWidget* parent) -> QWidget* {
    if (const std::string why = load_page_empty_reason(*session); !why.empty()) return empty_page(why, parent);
    return new LoadView(session, parent);
  });
  add_lazy_tab(this, "Memory", [session](QWidget* parent) -> QWidget* {
    if (const std::string why = memory_page_empty_reason(*session); !why.empty()) return empty_page(why, parent);
    return new MemoryView(session, parent);
  });
  set_base_title(*session);
}

QString SessionTab::title() const {
  if (!snapshot_) return base_title_;
  if (!session_) return base_title_ + (copy_ ? QString(" [running: copying snapshot]") : QString(" [running: snapshot failed]"));
  if (frozen_) return base_title_ + QString(" [running: %1]").arg(as_of(shown_));
  if (latest_.status != "running")
    return base_title_ + QString(" [%1; run ended: F5]").arg(as_of(shown_));
  if (latest_.steps > shown_.steps)
    return base_title_ + QString(" [running: %1, +%2: F5]").arg(as_of(shown_)).arg(latest_.steps - shown_.steps);
  return base_title_ + QString(" [running: %1]").arg(as_of(shown_));
}

void SessionTab::update_banner() {
  banner_->setVisible(snapshot_ && session_);
  if (snapshot_ && session_) {
    const QString head = as_of(shown_);
    QString text;
    if (frozen_)
      text = QString("%1 (%2 measured steps): the run was still writing this session when this image was made.")
                 .arg(head)
                 .arg(shown_.measured);
    else if (latest_.status != "running")
      text = QString("%1: the run has ended (%2, %3 measured steps). F5 reloads it.")
                 .arg(head, QString::fromStdString(latest_.status))
                 .arg(latest_.measured);
    else if (latest_.steps > shown_.steps)
      text = QString("%1: %2 more steps written since. F5 reloads them.").arg(head).arg(latest_.steps - shown_.steps);
    else
      text = QString("%1 (%2 measured steps): the run was still writing this session. F5 reloads it.")
                 .arg(head)
                 .arg(shown_.measured);
    text[0] = text[0].toUpper();
    if (copy_)  // a reload's copy: the pages above stay until it is read
      text = QString("Reloading: copying a snapshot (%1)... %2 %. ")
                 .arg(QString::fromStdString(sessions::format_bytes(copy_->bytes)))
                 .arg(copy_->total_pages > 0 ? copy_->copied_pages * 100 / copy_->total_pages : 0) +
             text;
    else if (!error_.isEmpty())
      text = "Reload failed: " + error_ + " " + text;
    banner_->setText(text);
    // the corner is laid out again now, not at the next event (an image taken at once cut it)
    QEvent relayout(QEvent::LayoutRequest);
    QCoreApplication::sendEvent(this, &relayout);
    banner_->setToolTip("Every page of this tab shows the steps committed when it was opened or last reloaded "
                        "(a snapshot of " + path_ + "); File > Reload (F5) reads the file again.");
  }
  emit title_changed(title());
}

void SessionTab::freeze() {
  frozen_ = true;
  timer_->stop();
  if (snapshot_ && session_) {
    update_banner();
    banner_->setToolTip({});
  }
}

void SessionTab::check_file() {
  if (frozen_ || !snapshot_ || !session_ || latest_.status != "running" || watch_job_->busy()) return;
  const QString look = file_look(path_);
  if (look == last_look_) return;
  last_look_ = look;
  watch_job_->start<SessionFileState>(
      [file = path_.toStdString()] { return session_file_state(sessions::SessionReader(file)); },
      [this](SessionFileState& s) {
        latest_ = s;
        if (latest_.status != "running") timer_->stop();
        update_banner();
      },
      [this](const QString&) { last_look_.clear(); });  // look again at the next tick
}

QString SessionTab::reload() {
  const QString look = file_look(path_);
  std::shared_ptr<const sessions::SessionReader> file;
  SessionFileState state;
  try {
    file = std::make_shared<const sessions::SessionReader>(path_.toStdString());
    if (file->status() == "running") {  // a new snapshot, copied on a worker
      start_copy(look);
      return {};
    }
    state = session_file_state(*file);
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
  if (copy_) {  // the run ended: the file itself, not the copy still running
    copy_->cancel = true;
    copy_.reset();
    copy_job_->cancel();
    progress_timer_->stop();
  }
  error_.clear();
  swap_in(std::move(file), false, state, look);
  return {};
}

void SessionTab::swap_in(std::shared_ptr<const sessions::SessionReader> session, bool snapshot,
                         const SessionFileState& state, const QString& look) {
  const bool first = !session_;  // the first snapshot of the tab: no pages to keep
  const int page = first ? 0 : currentIndex();
  std::optional<ViewRange> view, range;
  if (auto* tv = qobject_cast<TimelineView*>(widget(0))) {
    view = tv->timeline()->view();
    range = tv->timeline()->range();
  }
  watch_job_->cancel();
  {
    const QSignalBlocker quiet(this);  // no page is built on the way out (add_lazy_tab's currentChanged)
    while (count() > 0) {
      QWidget* w = widget(0);
      removeTab(0);
      delete w;  // its analyses' results are dropped (AnalysisJob)
    }
  }
  session_ = std::move(session);
  snapshot_ = snapshot;
  shown_ = latest_ = state;
  last_look_ = look;
  build_pages();
  setCurrentIndex(std::min(page, count() - 1));
  if (first && !timeline_page_empty_reason(*session_).empty() && memory_page_empty_reason(*session_).empty())
    setCurrentIndex(count() - 1);  // a memory snapshot: its Memory page, as a file that was not being written
  if (auto* tv = qobject_cast<TimelineView*>(widget(0))) {
    if (view) tv->timeline()->navigate(*view);  // clamped to the extent the file has now
    if (range) tv->timeline()->set_range(range);
  }
  if (snapshot_)
    timer_->start(1000);
  else
    timer_->stop();
  // the copies before this one: no page reads them now (a worker of a deleted page that still
  // does keeps its open file)
  if (snapshots_)
    for (int g = 1; g < generation_ || (!snapshot_ && g <= generation_); ++g)
      QDir(snapshots_->filePath(QString::number(g))).removeRecursively();
  update_banner();
}

}  // namespace embedscope::ui
