#include "views/memory_view.h"

#include "charts/colors.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QScrollArea>
#include <QVBoxLayout>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include <qcustomplot.h>

#include "embedscope/engine/sharding/sharding.h"  // format_bytes
#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::ui {

namespace {
std::string fmt_rank(int32_t rank) { return "rank " + std::to_string(rank) + ":"; }
}  // namespace

MemoryView::MemoryView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent)
    : QWidget(parent), session_(std::move(session)), counters_(session_->memory_counters()),
      snapshots_(session_->memory_snapshots()), rank_box_(new QComboBox(this)), snapshot_box_(new QComboBox(this)),
      plot_(new QCustomPlot(this)), map_(new BlockMap(this)), why_(new QLabel(this)) {
  std::set<int32_t> ranks;
  for (const auto& c : counters_) ranks.insert(c.rank);
  for (int32_t r : ranks) rank_box_->addItem(QString("rank %1").arg(r), r);
  for (const auto& s : snapshots_)
    snapshot_box_->addItem(QString("rank %1, step %2 (%3)").arg(s.rank).arg(s.step).arg(QString::fromStdString(s.reason)));
  auto* layout = new QVBoxLayout(this);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel("memory of", this));
  top->addWidget(rank_box_);
  top->addStretch(1);
  layout->addLayout(top);
  plot_->setMinimumSize(320, 220);
  layout->addWidget(plot_, 3);
  auto* mid = new QHBoxLayout;
  mid->addWidget(new QLabel("segments and blocks of", this));
  mid->addWidget(snapshot_box_);
  mid->addStretch(1);
  layout->addLayout(mid);
  why_->setWordWrap(true);
  why_->setStyleSheet("color: #b00000");
  why_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  why_->hide();
  layout->addWidget(why_);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(map_);
  scroll->setWidgetResizable(true);
  layout->addWidget(scroll, 2);
  if (counters_.empty()) layout->addWidget(new QLabel("this session has no memory records (schema version 1)", this));
  connect(rank_box_, &QComboBox::currentIndexChanged, this, [this](int i) { show_rank(rank_box_->itemData(i).toInt()); });
  connect(snapshot_box_, &QComboBox::currentIndexChanged, this, [this](int i) { show_snapshot(i); });
  if (!ranks.empty()) show_rank(*ranks.begin());
  // open on the OOM snapshot when there is one - of the rank the run's error names ("rank N: ...")
  // - since that is the question a user comes with
  int named_rank = -1;
  if (const std::string msg = session_->meta(sessions::meta::kEndMessage); msg.rfind("rank ", 0) == 0)
    named_rank = std::atoi(msg.c_str() + 5);
  int first = -1;
  for (size_t i = 0; i < snapshots_.size(); ++i)
    if (snapshots_[i].reason == "oom" && (first < 0 || snapshots_[i].rank == named_rank)) {
      first = static_cast<int>(i);
      if (snapshots_[i].rank == named_rank) break;
    }
  if (first < 0 && !snapshots_.empty())  // no OOM: the lowest rank's earliest snapshot (ranks write in any order)
    first = static_cast<int>(std::min_element(snapshots_.begin(), snapshots_.end(), [](const auto& a, const auto& b) {
                               return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
                             }) - snapshots_.begin());
  if (first < 0) first = 0;
  if (!snapshots_.empty()) {
    snapshot_box_->setCurrentIndex(first);
    show_snapshot(first);
  }
}

void MemoryView::show_rank(int rank) {
  plot_->clearGraphs();
  plot_->clearItems();
  QVector<double> steps, allocated, reserved, frag;
  for (const auto& c : counters_)
    if (c.rank == rank) {
      steps << static_cast<double>(c.step);
      allocated << static_cast<double>(c.allocated) / (1 << 20);
      reserved << static_cast<double>(c.reserved) / (1 << 20);
      frag << 100 * c.external_fragmentation;
    }
  auto* a = plot_->addGraph();
  a->setName("allocated");
  a->setData(steps, allocated);
  a->setPen(QPen(QColor(0x1f, 0x77, 0xb4), 2));
  auto* r = plot_->addGraph();
  r->setName("reserved");
  r->setData(steps, reserved);
  r->setPen(QPen(QColor(0xff, 0x7f, 0x0e), 2));
  auto* f = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
  f->setName("fragmentation %");
  f->setData(steps, frag);
  f->setPen(QPen(QColor(0x7f, 0x7f, 0x7f), 1, Qt::DashLine));
  plot_->xAxis->setLabel("step");
  plot_->yAxis->setLabel("MiB");
  plot_->legend->setVisible(true);
  plot_->rescaleAxes(true);
  plot_->yAxis->setRangeLower(0);
  plot_->yAxis->setRangeUpper(plot_->yAxis->range().upper * 1.1);
  plot_->yAxis2->setVisible(true);
  plot_->yAxis2->setLabel("fragmentation %");
  plot_->yAxis2->setRange(0, 100);
  for (const auto& s : snapshots_)  // OOM markers
    if (s.rank == rank && s.reason == "oom") {
      auto* line = new QCPItemStraightLine(plot_);
      line->point1->setCoords(static_cast<double>(s.step), 0);
      line->point2->setCoords(static_cast<double>(s.step), 1);
      line->setPen(QPen(Qt::red, 2));
      auto* label = new QCPItemText(plot_);
      label->position->setCoords(static_cast<double>(s.step), plot_->yAxis->range().upper * 0.95);
      label->setText("OOM");
      label->setColor(Qt::red);
    }
  follow_palette(plot_);
  if (plot_->isVisible()) plot_->replot();
}

void MemoryView::show_snapshot(int index) {
  if (index < 0 || static_cast<size_t>(index) >= snapshots_.size()) return;
  const auto& sn = snapshots_[static_cast<size_t>(index)];
  map_->set_blocks(session_->memory_blocks(sn.id));
  if (const int i = rank_box_->findData(sn.rank); i >= 0 && i != rank_box_->currentIndex())
    rank_box_->setCurrentIndex(i);  // the chart follows the snapshot's rank
  const std::string msg = session_->meta(sessions::meta::kEndMessage);
  const bool oom = sn.reason == "oom" && msg.rfind(fmt_rank(sn.rank), 0) == 0;
  why_->setText(oom ? QString::fromStdString(session_->meta(sessions::meta::kEndMessage)) : QString());
  why_->setVisible(oom);
}

}  // namespace embedscope::ui
