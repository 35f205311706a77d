#include "views/summary_peer_tables.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QAbstractScrollArea>
#include <QScrollBar>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>

#include "embedscope/sessions/analysis/stragglers.h"
#include "embedscope/sessions/model/units.h"
#include "models/kernel_breakdown_model.h"
#include "models/peer_waits_model.h"

namespace embedscope::ui {

namespace {
// A table as tall as its rows (a few), its columns sized to their contents.
QTableView* peer_rows_table(QAbstractItemModel* m, const QString& name, QWidget* page) {
  auto* view = new QTableView(page);
  view->setObjectName(name);
  view->setModel(m);
  m->setParent(view);
  view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  view->verticalHeader()->hide();
  view->verticalHeader()->setDefaultSectionSize(view->fontMetrics().height() + 6);
  view->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);  // as wide as its columns, no wider
  view->setMaximumHeight(view->horizontalHeader()->sizeHint().height() +
                         m->rowCount() * view->verticalHeader()->defaultSectionSize() + 2 * view->frameWidth() +
                         view->horizontalScrollBar()->sizeHint().height());
  return view;
}

QLabel* peer_caption(const QString& html, const QString& name, QWidget* page) {
  auto* l = new QLabel(html, page);
  l->setObjectName(name);
  l->setWordWrap(true);
  l->setTextInteractionFlags(Qt::TextSelectableByMouse);
  return l;
}
}  // namespace

void add_peer_and_kernel_tables(QVBoxLayout* layout, QWidget* page, const sessions::RunStats& st,
                                sessions::KernelBreakdown breakdown, std::vector<std::string> names) {
  // the same division as `stats` (stats.cpp: whole trace 1, else the counted steps)
  const int64_t per = st.whole_trace ? 1 : std::max<int64_t>(1, st.counted_steps());
  if (!sessions::straggler_text(st.peer_waits, per).empty()) {
    layout->addWidget(peer_caption(QString("<b>Waiting for peers</b>, per rank (a collective on 2 ranks or more: from the "
                                           "rank's start of it to the start of its last member; times per %1, as "
                                           "<tt>embedscope stats</tt> prints them)")
                                       .arg(st.whole_trace ? "the whole trace" : "counted step"),
                                   "peer_waits_caption", page));
    layout->addWidget(peer_rows_table(new PeerWaitsModel(st.peer_waits, per), "peer_waits", page), 0, Qt::AlignLeft);
  }
  if (breakdown.events == 0) return;
  layout->addWidget(peer_caption(QString("<b>GPU kernel breakdown</b> (Holistic Trace Analysis' get_gpu_kernel_breakdown, "
                                         "summed over ranks%1): %2 of GPU event time, the shares' 100 %; per type, and "
                                         "the kernels with the most time")
                                     .arg(breakdown.microsecond_rounding ? "; whole us" : "")
                                     .arg(QString::fromStdString(sessions::format_duration(breakdown.total_ns))),
                                 "kernel_breakdown_caption", page));
  auto* row = new QHBoxLayout;  // the types beside the kernels
  row->addWidget(peer_rows_table(new KernelTypesModel(breakdown.types), "kernel_types", page), 0, Qt::AlignTop);
  auto* kernels = new KernelBreakdownModel(std::move(breakdown), std::move(names));
  const QString more = kernels->left_out_text();
  auto* view = peer_rows_table(kernels, "kernel_breakdown", page);
  // a C++ kernel name of a trace is long: the name column elided in the middle, whole in its tooltip
  view->horizontalHeader()->setSectionResizeMode(KernelBreakdownModel::Kernel, QHeaderView::Interactive);
  view->setTextElideMode(Qt::ElideMiddle);
  view->resizeColumnToContents(KernelBreakdownModel::Kernel);
  view->setColumnWidth(KernelBreakdownModel::Kernel,
                       std::min(view->columnWidth(KernelBreakdownModel::Kernel), view->fontMetrics().averageCharWidth() * 60));
  view->setMinimumHeight(std::min(view->maximumHeight(), 6 * view->verticalHeader()->defaultSectionSize()));
  row->addWidget(view, 1);
  layout->addLayout(row);
  if (!more.isEmpty()) layout->addWidget(peer_caption(more.toHtmlEscaped(), "kernel_breakdown_more", page));
}

}  // namespace embedscope::ui
