// StartPage (start_page.h).
#include "shell/start_page.h"

#include <QCommandLinkButton>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QUrl>
#include <QScrollArea>
#include <QVBoxLayout>

#include "embedscope/engine/workload/scenario.h"

namespace embedscope::ui {

namespace {
QLabel* heading(const QString& text, QWidget* parent) {
  auto* l = new QLabel("<b>" + text.toHtmlEscaped() + "</b>", parent);
  QFont f = l->font();
  f.setPointSizeF(f.pointSizeF() * 1.15);
  l->setFont(f);
  return l;
}

QCommandLinkButton* action(const QString& name, const QString& text, const QString& what, QWidget* parent) {
  auto* b = new QCommandLinkButton(text, what, parent);
  b->setObjectName(name);
  return b;
}
}  // namespace

StartPage::StartPage(const QStringList& recent, QWidget* parent) : QWidget(parent) {
  setObjectName("start_page");
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);  // at 1000x650 the lists scroll, nothing is squeezed
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  outer->addWidget(scroll);
  auto* body = new QWidget(scroll);
  scroll->setWidget(body);
  auto* grid = new QGridLayout(body);
  grid->setContentsMargins(24, 16, 24, 16);
  grid->setHorizontalSpacing(32);

  auto* title = new QLabel("<h2>Embedscope</h2>A workbench for embedding parallelism: where the time and memory of a "
                           "sharded embedding step go. Start with one of these (also in the File menu):",
                           body);
  title->setWordWrap(true);
  grid->addWidget(title, 0, 0, 1, 2);

  auto* left = new QVBoxLayout;
  left->addWidget(heading("Start", body));
  auto* open = action("start_open", "Open a session, trace or memory snapshot...",
                      "a session (.db) that embedscope run, import or merge wrote; a PyTorch profiler trace (.json, "
                      ".json.gz); an Nsight Systems export (.sqlite, .nsys-rep); a PyTorch CUDA memory snapshot "
                      "(.pickle): traces and snapshots are imported first",
                      body);
  auto* folder = action("start_open_folder", "Open a folder of per-rank traces...",
                        "one PyTorch profiler trace per rank, imported as one session", body);
  auto* design = action("start_new_workload", "New workload...",
                        "design tables, sharding and devices: the plan, the memory per device, then Run", body);
  auto* compare = action("start_compare", "Compare sessions...",
                         "two or more sessions side by side: step time, exposed communication, memory", body);
  connect(open, &QAbstractButton::clicked, this, &StartPage::open_requested);
  connect(folder, &QAbstractButton::clicked, this, &StartPage::open_folder_requested);
  connect(design, &QAbstractButton::clicked, this, &StartPage::new_workload_requested);
  connect(compare, &QAbstractButton::clicked, this, &StartPage::compare_requested);
  for (auto* b : {open, folder, design, compare}) left->addWidget(b);
  auto* cli = new QLabel("No session yet? <code>embedscope run --preset tiny -o run.db</code> records one in a few "
                         "seconds (or New workload... &gt; Run); then open run.db.",
                         body);
  cli->setWordWrap(true);
  cli->setTextInteractionFlags(Qt::TextSelectableByMouse);
  left->addWidget(cli);
  left->addSpacing(12);
  left->addWidget(heading("Recent files", body));
  recent_box_ = new QVBoxLayout;
  left->addLayout(recent_box_);
  left->addStretch(1);
  grid->addLayout(left, 1, 0);

  auto* right = new QVBoxLayout;
  right->addWidget(heading("Teaching scenarios", body));
  auto* intro = new QLabel("Each runs a few small configurations and explains what differs between them "
                           "(File > Open Scenario):",
                           body);
  intro->setWordWrap(true);
  right->addWidget(intro);
  try {
    for (const engine::Scenario& sc : engine::builtin_scenarios()) {
      const QString id = QString::fromStdString(sc.id);
      // a link that wraps (a button's one line held the page 1,250 px wide)
      auto* b = new QLabel(QString("<a href=\"%1\">%2</a> &nbsp;(%3 runs)")
                               .arg(id, QString::fromStdString(sc.title).toHtmlEscaped())
                               .arg(sc.runs.size()),
                           body);
      b->setObjectName("start_scenario_" + id);
      b->setWordWrap(true);
      b->setToolTip(QString::fromStdString(sc.title) + " (" + id + ")");
      connect(b, &QLabel::linkActivated, this, [this](const QString& which) { emit scenario_requested(which); });
      right->addWidget(b);
      scenario_ids_ << id;
    }
  } catch (const std::exception& e) {
    auto* err = new QLabel(QString::fromUtf8(e.what()), body);
    err->setWordWrap(true);
    right->addWidget(err);
  }
  right->addStretch(1);
  grid->addLayout(right, 1, 1);
  grid->setColumnStretch(0, 1);
  grid->setColumnStretch(1, 1);
  set_recent(recent);
}

void StartPage::set_recent(const QStringList& recent) {
  while (QLayoutItem* item = recent_box_->takeAt(0)) {
    if (QWidget* w = item->widget()) {  // later: the clicked button may be the one whose click opened a file
      w->hide();
      w->deleteLater();
    }
    delete item;
  }
  if (recent.isEmpty()) {
    auto* none = new QLabel("none yet: the files you open are listed here", recent_box_->parentWidget());
    none->setObjectName("start_recent_none");
    recent_box_->addWidget(none);
    return;
  }
  for (const QString& path : recent) {
    // a link cut at the page's width, not widening it; the whole path in its tooltip
    auto* b = new QLabel(QString("<a href=\"%1\">%2</a> &nbsp; %3")
                             .arg(QString::fromUtf8(QUrl::toPercentEncoding(path)),
                                  QFileInfo(path).fileName().toHtmlEscaped(), QFileInfo(path).absolutePath().toHtmlEscaped()),
                         this);
    b->setObjectName("start_recent");
    b->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    b->setToolTip(path);
    connect(b, &QLabel::linkActivated, this,
            [this](const QString& which) { emit recent_requested(QUrl::fromPercentEncoding(which.toUtf8())); });
    recent_box_->addWidget(b);
  }
}

}  // namespace embedscope::ui
