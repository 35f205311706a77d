#include "shell/session_tab.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QEvent>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QSignalBlocker>
#include <QTemporaryDir>
#include <QTimer>
#include <QVBoxLayout>

#include <functional>
#include <iterator>
#include <optional>
#include <set>

#include "core/empty_pages.h"
#include "core/timeline_math.h"
#include "embedscope/sessions/model/metadata_keys.h"
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

SessionTab::SessionTab(const QString& path, QWidget* parent)
    : QTabWidget(parent), path_(path), banner_(new QLabel(this)), timer_(new QTimer(this)),
      watch_job_(new AnalysisJob(this)) {
  banner_->setObjectName("live_banner");
  banner_->setStyleSheet("QLabel { background: #fff1b8; color: #3d3000; padding: 2px 8px; }");
  banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  banner_->hide();
  setCornerWidget(banner_, Qt::TopRightCorner);
  last_look_ = file_look(path_);
  auto opened = open_file();
  session_ = std::move(opened.first);
  snapshot_ = opened.second;
  shown_ = latest_ = session_file_state(*session_);
  build_pages();
  // a memory snapshot has nothing but its Memory page: open there (tester43 F14), not on the
  // Timeline's sentence (the tabs stay, the sentence says why the Timeline is empty)
  if (!timeline_page_empty_reason(*session_).empty() && memory_page_empty_reason(*session_).empty())
    setCurrentIndex(count() - 1);
  connect(timer_, &QTimer::timeout, this, &SessionTab::check_file);
  if (snapshot_) timer_->start(1000);
  update_banner();
}

SessionTab::~SessionTab() = default;

std::pair<std::shared_ptr<const sessions::SessionReader>, bool> SessionTab::open_file() {
  auto reader = std::make_shared<const sessions::SessionReader>(path_.toStdString());
  if (reader->status() != "running") return {reader, false};
  // still being written: every page reads one copy of what is committed now
  if (!snapshots_) snapshots_ = std::make_unique<QTemporaryDir>(QDir::tempPath() + "/embedscope-snapshot-XXXXXX");
  if (!snapshots_->isValid())
    throw sessions::SessionError(path_.toStdString() + ": cannot make a folder for its snapshot (" +
                                 snapshots_->errorString().toStdString() + ")");
  const QString folder = snapshots_->filePath(QString::number(generation_ + 1));
  if (!QDir().mkpath(folder))
    throw sessions::SessionError(folder.toStdString() + ": cannot make a folder for the snapshot of " +
                                 path_.toStdString());
  const QString copy = folder + "/" + QFileInfo(path_).fileName();  // pages that name the file name it
  sessions::copy_session_snapshot(path_.toStdString(), copy.toStdString());
  ++generation_;
  return {std::make_shared<const sessions::SessionReader>(copy.toStdString()), true};
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
  QString title = QFileInfo(path_).fileName();
  if (const std::string ended = session->status(); ended != "complete" && !snapshot_)
    title += QString(" [%1]").arg(QString::fromStdString(ended));
  if (session->meta(sessions::meta::kImported) == "1")
    title += QString(" [imported: %1]").arg(QString::fromStdString(session->meta(sessions::meta::kImportFormat)));
  if (session->meta(sessions::meta::kSimulated) == "1") title += " [SIMULATED]";  // timed by a cost model
  base_title_ = title;
}

QString SessionTab::title() const {
  if (!snapshot_) return base_title_;
  if (latest_.status != "running")
    return base_title_ + QString(" [%1; run ended: F5]").arg(as_of(shown_));
  if (latest_.steps > shown_.steps)
    return base_title_ + QString(" [running: %1, +%2: F5]").arg(as_of(shown_)).arg(latest_.steps - shown_.steps);
  return base_title_ + QString(" [running: %1]").arg(as_of(shown_));
}

void SessionTab::update_banner() {
  banner_->setVisible(snapshot_);
  if (snapshot_) {
    const QString head = as_of(shown_);
    QString text;
    if (latest_.status != "running")
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
    banner_->setText(text);
    // the corner is laid out again now, not at the next event (an image taken at once cut it)
    QEvent relayout(QEvent::LayoutRequest);
    QCoreApplication::sendEvent(this, &relayout);
    banner_->setToolTip("Every page of this tab shows the steps committed when it was opened or last reloaded "
                        "(a snapshot of " + path_ + "); File > Reload (F5) reads the file again.");
  }
  emit title_changed(title());
}

void SessionTab::check_file() {
  if (!snapshot_ || latest_.status != "running" || watch_job_->busy()) return;
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
  std::pair<std::shared_ptr<const sessions::SessionReader>, bool> opened;
  const QString look = file_look(path_);
  SessionFileState state;
  try {
    opened = open_file();
    state = session_file_state(*opened.first);
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
  const int page = currentIndex();
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
  session_ = std::move(opened.first);
  snapshot_ = opened.second;
  shown_ = latest_ = state;
  last_look_ = look;
  build_pages();
  setCurrentIndex(std::min(page, count() - 1));
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
  return {};
}

}  // namespace embedscope::ui
