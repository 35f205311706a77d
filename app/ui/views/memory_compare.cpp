#include "views/memory_compare.h"

#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QScrollArea>
#include <QHeaderView>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>
#include <set>

#include <qcustomplot.h>

#include "embedscope/engine/sharding/sharding.h"  // format_bytes
#include "charts/colors.h"  // session_color
#include "charts/plot_axes.h"
#include "core/equal_series.h"
#include "views/memory_view.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

const sessions::MemorySnapshot* snapshot_at(const std::vector<sessions::MemorySnapshot>& snapshots, int32_t rank,
                                            int64_t step) {
  const sessions::MemorySnapshot* best = nullptr;
  for (const auto& s : snapshots) {
    if (s.rank != rank || s.step > step) continue;
    // later steps win; at one step the OOM snapshot (the state that failed) wins, then the later one
    if (!best || s.step > best->step || (s.step == best->step && (s.reason == "oom" || best->reason != "oom")))
      best = &s;
  }
  return best;
}

QString step_name(int64_t step) {
  return step < 0 ? QString("the warm-up (before measured step 0)") : QString("step %1").arg(step);
}

QString oom_legend_entry(const QString& name, const std::vector<int64_t>& oom_steps) {
  if (oom_steps.empty()) return name;
  QStringList when;
  for (int64_t step : oom_steps)
    if (!when.contains(step_name(step))) when << step_name(step);
  return QString("%1: OOM in %2").arg(name, when.join(", "));
}

QString no_memory_records_text(const std::vector<LabelledSession>& sessions) {
  QStringList parts;
  for (const auto& x : sessions) {
    const auto& r = *x.session;
    QString why = "no memory records";
    if (r.meta(sessions::meta::kImported) == "1") {
      const std::string format = r.meta(sessions::meta::kImportFormat, "");
      const QString what = format == "kineto_json"   ? "PyTorch profiler (Kineto)"
                           : format == "nsys_sqlite" ? "Nsight Systems"
                                                     : QString::fromStdString(format.empty() ? "profiler" : format);
      why = QString("an imported %1 trace, which records no allocations (import a PyTorch memory snapshot, or run "
                    "the workload, for the allocator's history)")
                .arg(what);
    }
    else if (r.schema_version() <= 1)
      why = "schema version 1, before memory was recorded";
    parts << QString("%1: %2").arg(x.label, why);
  }
  return parts.join("; ");
}

QString snapshot_when(const sessions::MemorySnapshot& shown, int64_t step, int64_t last_step) {
  if (shown.reason == "oom") return QString("the layout at its OOM in %1").arg(step_name(shown.step));
  if (shown.step == step) return QString("snapshot of %1").arg(step_name(step));
  // a shorter session: its own last step, never one it did not have (tester60a F1)
  if (step > last_step && last_step >= shown.step) {
    const QString none = QString(" (it has no %1)").arg(step_name(step));
    if (shown.step == last_step) return QString("snapshot of its last step %1%2").arg(last_step).arg(none);
    return QString("the layout of %1, unchanged up to its last step %2%3").arg(step_name(shown.step)).arg(last_step).arg(none);
  }
  // snapshots are taken when the layout changes (FORMAT.md)
  return QString("the layout of %1, unchanged up to %2").arg(step_name(shown.step), step_name(step));
}

MapFigures map_figures(const std::vector<sessions::MemoryBlockRecord>& blocks) {
  MapFigures f;
  std::set<int64_t> segments;
  for (const auto& b : blocks) {
    if (segments.insert(b.segment_address).second) f.reserved += b.segment_size;
    if (b.allocated && b.pending_free) {
      f.pending_free += b.size;  // snap54 (tester54 F9): 101.3 MiB "allocated" beside the chart's 97.3
    } else if (b.allocated) {
      f.allocated += b.size;
    } else {
      f.free += b.size;
      f.largest_free = std::max(f.largest_free, b.size);
    }
  }
  f.segments = static_cast<int64_t>(segments.size());
  f.fragmentation = f.free > 0 ? 1.0 - static_cast<double>(f.largest_free) / static_cast<double>(f.free) : 0.0;
  return f;
}

int MemoryCompare::map_columns(size_t sessions) {
  if (sessions <= kMapsPerRow) return static_cast<int>(std::max<size_t>(1, sessions));
  const size_t rows = (sessions + kMapsPerRow - 1) / kMapsPerRow;
  return static_cast<int>((sessions + rows - 1) / rows);
}

MemoryCompare::MemoryCompare(const std::vector<LabelledSession>& sessions, QWidget* parent)
    : QWidget(parent), rank_box_(new QComboBox(this)), step_box_(new QSpinBox(this)), plot_(new QCustomPlot(this)) {
  std::set<int32_t> ranks;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const auto& s : sessions) {
    entries_.push_back({s, s.session->memory_counters(), s.session->memory_snapshots(), {}, {}});
    for (const auto& c : entries_.back().counters) {
      ranks.insert(c.rank);
      entries_.back().ranks.insert(c.rank);
      entries_.back().last_step = std::max(entries_.back().last_step, c.step);
      first = std::min(first, c.step);
      last = std::max(last, c.step);
    }
  }
  if (first > last) first = last = 0;
  for (int32_t r : ranks) rank_box_->addItem(QString("rank %1").arg(r), r);
  step_box_->setRange(static_cast<int>(first), static_cast<int>(last));
  step_box_->setValue(static_cast<int>(last));
  auto* layout = new QVBoxLayout(this);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel("memory of", this));
  top->addWidget(rank_box_);
  top->addWidget(new QLabel("blocks at the end of step", this));
  top->addWidget(step_box_);
  auto* key = new QLabel("(solid: allocated, dashed: reserved; fragmentation in the chart below; the first "
                         "session's lines wide and pale under the others'; \"B = A\": B's lines are A's, drawn over them)",
                         this);
  key->setWordWrap(true);  // in one line it held the window 1047 px wide
  top->addWidget(key, 1);
  layout->addLayout(top);
  // tester43 F13: a 620 MiB weights block left the 2 and 20 MiB segments 1-3 px wide (one blue bar a map)
  // (a check box's text does not wrap: short, the rest in its tool tip; its full text held the page 569 px wide)
  cut_box_ = new QCheckBox("cut a block that dwarfs the others", this);
  cut_box_->setToolTip("cut a block that dwarfs the other segments (e.g. the weights) so the small segments show");
  cut_box_->setObjectName("memory_compare_cut");
  cut_box_->setChecked(true);
  plot_->setMinimumSize(320, 200);
  // the charts take most of the height (at 1280x800 they were 70 and 50 px tall over maps of
  // one bar each); the maps scroll
  layout->addWidget(plot_, 3);
  // the maps in rows of at most kMapsPerRow, evenly filled (11 sessions: 6 + 5), each wide
  // enough for its byte scale (tester42 F26: 11 in one row overprinted their scales)
  auto* maps = new QGridLayout;
  const int per_row = map_columns(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    auto* col = new QVBoxLayout;
    auto* label = new QLabel(this);
    label->setWordWrap(true);
    map_labels_.push_back(label);
    auto* map = new BlockMap(this);
    maps_.push_back(map);
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(map);
    scroll->setWidgetResizable(true);
    col->addWidget(label);
    col->addWidget(scroll, 1);
    maps->addLayout(col, static_cast<int>(i) / per_row, static_cast<int>(i) % per_row);
  }
  for (int c = 0; c < per_row; ++c) maps->setColumnStretch(c, 1);
  // every device's fragmentation at the step, a row a rank, a column a session (the maps show one
  // rank; clicking a row shows its maps)
  devices_ = new QTableWidget(static_cast<int>(ranks.size()), static_cast<int>(entries_.size()), this);
  devices_->setObjectName("memory_compare_devices");
  QStringList heads;
  for (const auto& e : entries_) heads << e.s.label;
  devices_->setHorizontalHeaderLabels(heads);
  QStringList rows;
  for (int32_t r : ranks) rows << QString("rank %1").arg(r);
  devices_->setVerticalHeaderLabels(rows);
  devices_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  devices_->setSelectionBehavior(QAbstractItemView::SelectRows);
  devices_->setSelectionMode(QAbstractItemView::SingleSelection);
  devices_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  devices_->verticalHeader()->setDefaultSectionSize(20);
  devices_->setMaximumHeight(28 + 20 * std::min<int>(5, static_cast<int>(ranks.size())));
  devices_->setToolTip("fragmentation (1 - largest free block / free bytes in segments) of each device's map at the "
                       "end of the step; the largest of a row in bold; click a row to show that rank's maps");
  auto* devices_label = new QLabel("each device at the end of the step: fragmentation, largest free block of the free "
                                   "bytes in segments (bold: the worst session of a rank; click a row for its maps)", this);
  devices_label->setWordWrap(true);
  layout->addWidget(devices_label);
  layout->addWidget(devices_);
  devices_label->setVisible(!ranks.empty());  // no memory records: no table (the sentence below says why)
  devices_->setVisible(!ranks.empty());
  layout->addWidget(cut_box_);
  layout->addLayout(maps, 1);
  if (ranks.empty()) {
    std::vector<LabelledSession> all;
    for (const auto& e : entries_) all.push_back(e.s);
    auto* none = new QLabel("these sessions have no memory records: " + no_memory_records_text(all), this);
    none->setObjectName("memory_compare_none");
    none->setWordWrap(true);
    layout->addWidget(none);
  }
  auto refresh = [this] { show(rank_box_->currentData().toInt(), step_box_->value()); };
  connect(rank_box_, &QComboBox::currentIndexChanged, this, refresh);
  connect(step_box_, &QSpinBox::valueChanged, this, refresh);
  connect(cut_box_, &QCheckBox::toggled, this, refresh);
  connect(devices_, &QTableWidget::cellClicked, this, [this](int row, int) {
    const QString name = devices_->verticalHeaderItem(row)->text();  // "rank N"
    show(name.mid(5).toInt(), step_box_->value());
  });
  if (!ranks.empty()) show(*ranks.begin(), last);
}

void MemoryCompare::show(int32_t rank, int64_t step) {
  plot_->clearGraphs();
  plot_->clearItems();
  if (!frag_rect_) {  // fragmentation in a chart of its own under the bytes (tester60a F3), the legend under both
    frag_rect_ = new QCPAxisRect(plot_);
    plot_->plotLayout()->addElement(1, 0, frag_rect_);
    auto* margins = new QCPMarginGroup(plot_);
    plot_->axisRect()->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
    frag_rect_->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
    frag_rect_->axis(QCPAxis::atLeft)->setLabel("fragmentation %");
    frag_rect_->axis(QCPAxis::atLeft)->setRange(0, 100);
    frag_rect_->axis(QCPAxis::atRight)->setVisible(true);  // the bytes chart's right edge: the same width
    frag_rect_->axis(QCPAxis::atRight)->setTickLabels(false);
    frag_rect_->axis(QCPAxis::atRight)->setTicks(false);
    plot_->yAxis2->setVisible(true);
    plot_->yAxis2->setTickLabels(false);
    plot_->yAxis2->setTicks(false);
    plot_->plotLayout()->setRowStretchFactor(0, 2);
    plot_->plotLayout()->setRowStretchFactor(1, 1);
  }
  // every session's line at one width, told apart by colour and marker (tester42 F26: widths
  // growing with position let the first sessions paint over the rest); a session whose curves
  // equal an earlier one's is covered exactly, so its legend entry says "B = A"
  std::vector<std::vector<double>> curves(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i)
    for (const auto& c : entries_[i].counters)
      if (c.rank == rank)
        curves[i].insert(curves[i].end(), {static_cast<double>(c.step), static_cast<double>(c.allocated),
                                           static_cast<double>(c.reserved), c.external_fragmentation});
  same_ = ui::same_as_earlier(curves);
  for (size_t i = 0; i < entries_.size(); ++i) {
    QVector<double> steps, allocated, reserved, frag;
    for (const auto& c : entries_[i].counters)
      if (c.rank == rank) {
        steps << static_cast<double>(c.step);
        allocated << static_cast<double>(c.allocated) / (1 << 20);
        reserved << static_cast<double>(c.reserved) / (1 << 20);
        frag << 100 * c.external_fragmentation;
      }
    const QColor color = session_color(i);
    const QString& label = entries_[i].s.label;
    const auto marker = static_cast<QCPScatterStyle::ScatterShape>(session_marker(i));
    // the baseline under the rest: wide and translucent, so a later session's line on top of it
    // leaves it showing on both sides (tester60a F3)
    QColor pen_color = color;
    if (i == 0 && entries_.size() > 1) pen_color.setAlpha(kBaselineAlpha);
    const double width = i == 0 && entries_.size() > 1 ? kBaselineWidth : kLineWidth;
    auto add = [&](const QVector<double>& ys, const QString& what, Qt::PenStyle style, bool frag) {
      auto* g = frag ? plot_->addGraph(frag_rect_->axis(QCPAxis::atBottom), frag_rect_->axis(QCPAxis::atLeft))
                     : plot_->addGraph(plot_->xAxis, plot_->yAxis);
      g->setName(label + " " + what);
      g->setData(steps, ys);
      g->setPen(QPen(pen_color, width, style));
      g->setScatterStyle(QCPScatterStyle(marker, color, kMarkerSize));  // one step shows too
      return g;
    };
    // one legend entry a session (its allocated line and marker); the header says what the dashes are
    auto* a = add(allocated, "allocated", Qt::SolidLine, false);
    a->setName(same_[i] >= 0 ? QString("%1 = %2").arg(label, entries_[static_cast<size_t>(same_[i])].s.label) : label);
    add(reserved, "reserved", Qt::DashLine, false)->removeFromLegend();
    add(frag, "fragmentation %", Qt::SolidLine, true)->removeFromLegend();
    // OOM markers: a line in the session's colour, said in its legend entry (a text in the
    // chart covered the lines: "caching: OOM at step -1" over the allocated line)
    std::vector<int64_t> oom_steps;
    for (const auto& s : entries_[i].snapshots)
      if (s.rank == rank && s.reason == "oom") {
        auto* line = new QCPItemStraightLine(plot_);
        line->point1->setCoords(static_cast<double>(s.step), 0);
        line->point2->setCoords(static_cast<double>(s.step), 1);
        line->setPen(QPen(color, 2));
        oom_steps.push_back(s.step);
      }
    a->setName(oom_legend_entry(a->name(), oom_steps));
  }
  int64_t lowest = 0;  // steps < 0 are the warm-up's (tester42 F23: "step -1" meant nothing to a user)
  for (const auto& e : entries_)
    for (const auto& c : e.counters)
      if (c.rank == rank) lowest = std::min(lowest, c.step);
  // two or more warm-up steps: the axis starts at -2 or lower (tester43 F13 said "-1: ..." there)
  plot_->xAxis->setLabel(lowest == 0    ? QString("step")
                         : lowest == -1 ? QString("step (-1: the warm-up, before measured step 0)")
                                        : QString("step (%1..-1: the warm-up steps, before measured step 0)").arg(lowest));
  plot_->xAxis->setTicker(integer_ticker());
  frag_rect_->axis(QCPAxis::atBottom)->setTicker(integer_ticker());
  plot_->yAxis->setLabel("MiB");
  plot_->legend->setVisible(true);
  plot_->legend->setFont(QFont(plot_->font().family(), 8));
  if (plot_->plotLayout()->rowCount() == 2) {  // in a row of its own under the charts, not over the lines (tester41 #6)
    plot_->plotLayout()->addElement(2, 0, plot_->legend);
    plot_->plotLayout()->setRowStretchFactor(2, 0.001);
    plot_->legend->setFillOrder(QCPLegend::foColumnsFirst);
  }
  // one entry a session, kLegendColumns a row: 12 sessions in one or two rows, the plot taller by
  // a row of legend for each further row (tester42 F26: 33 entries in 3 columns were cut)
  plot_->legend->setWrap(kLegendColumns);
  const int legend_rows = static_cast<int>((entries_.size() + kLegendColumns - 1) / kLegendColumns);
  plot_->setMinimumHeight(240 + 18 * std::max(0, legend_rows - 1));  // and the fragmentation chart
  plot_->rescaleAxes(true);
  plot_->xAxis->setRange(plot_->xAxis->range().lower - 0.5, plot_->xAxis->range().upper + 0.5);
  plot_->yAxis->setRange(0, std::max(1.0, plot_->yAxis->range().upper * 1.1));
  // tester43 F13: allocated / reserved lines at 620-646 MiB on a 0-700 MiB axis hid semi_sync's
  // +1.9 MiB: when every point is above half the largest, the axis starts near the lowest (said)
  double lo = std::numeric_limits<double>::max(), hi = 0;
  for (int g = 0; g < plot_->graphCount(); ++g)
    if (plot_->graph(g)->valueAxis() == plot_->yAxis)
      for (auto it = plot_->graph(g)->data()->constBegin(); it != plot_->graph(g)->data()->constEnd(); ++it) {
        lo = std::min(lo, it->value);
        hi = std::max(hi, it->value);
      }
  if (hi > 0 && lo > 0.5 * hi) {
    const double span = std::max(hi - lo, 0.01 * hi);
    plot_->yAxis->setRange(lo - 0.25 * span, hi + 0.1 * span);
    plot_->yAxis->setLabel("MiB (not from 0)");
  } else {
    plot_->yAxis->setLabel("MiB");
  }
  frag_rect_->axis(QCPAxis::atBottom)->setRange(plot_->xAxis->range());
  frag_rect_->axis(QCPAxis::atLeft)->setRange(0, 100);
  plot_->replot();

  // the maps at `step`, on one scale: the widest segment of any of them spans the full width, or
  // with the cut the widest scale any of them needs (map_scale_bytes), blocks dwarfing it cut
  const bool cut = cut_box_->isChecked();
  std::vector<std::vector<sessions::MemoryBlockRecord>> blocks(entries_.size());
  std::vector<const sessions::MemorySnapshot*> shown(entries_.size());
  map_width_ = 1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    shown[i] = snapshot_at(entries_[i].snapshots, rank, step);
    if (!shown[i]) continue;
    blocks[i] = entries_[i].s.session->memory_blocks(shown[i]->id);
    if (!blocks[i].empty()) map_width_ = std::max(map_width_, map_scale_bytes(blocks[i], 0, cut));
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    const MapFigures f = map_figures(blocks[i]);
    map_labels_[i]->setText(
        shown[i] ? QString("<span style=\"color:%1\">&#9632;</span> <b>%2</b>: rank %3, %4: "
                           "%5, %6 reserved, %7 allocated%11; %8 free in segments, largest free block %9, "
                           "fragmentation %10%")
                       .arg(session_color(i).name(), entries_[i].s.label.toHtmlEscaped())
                       .arg(rank)
                       .arg(snapshot_when(*shown[i], step, entries_[i].last_step))
                       .arg(f.segments == 1 ? QString("1 segment") : QString("%1 segments").arg(f.segments))
                       .arg(QString::fromStdString(sessions::format_bytes(f.reserved)),
                            QString::fromStdString(sessions::format_bytes(f.allocated)),
                            QString::fromStdString(sessions::format_bytes(f.free)),
                            QString::fromStdString(sessions::format_bytes(f.largest_free)))
                       .arg(100 * f.fragmentation, 0, 'f', 1)
                       .arg(f.pending_free > 0
                                ? QString(" (and %1 in blocks whose free is pending)")
                                      .arg(QString::fromStdString(sessions::format_bytes(f.pending_free)))
                                : QString())
                 : QString("<b>%1</b>: %2").arg(entries_[i].s.label.toHtmlEscaped(), no_map_text(i, rank, step, false)));
    maps_[i]->set_cut_big_blocks(cut);
    maps_[i]->set_blocks(std::move(blocks[i]), map_width_);
  }
  fill_devices(step);
  if (rank_box_->currentData().toInt() != rank) rank_box_->setCurrentIndex(rank_box_->findData(rank));
  if (step_box_->value() != step) step_box_->setValue(static_cast<int>(step));
}

}  // namespace embedscope::ui

namespace embedscope::ui {

QString MemoryCompare::no_map_text(size_t i, int32_t rank, int64_t step, bool short_form) const {
  const Entry& e = entries_[i];
  // a session of fewer ranks has no such rank: said so, not "no snapshot" (tester60a F1)
  if (!e.ranks.empty() && !e.ranks.count(rank) &&
      std::none_of(e.snapshots.begin(), e.snapshots.end(), [rank](const auto& s) { return s.rank == rank; })) {
    if (short_form) return QString("no rank %1").arg(rank);
    const bool whole = *e.ranks.rbegin() - *e.ranks.begin() + 1 == static_cast<int32_t>(e.ranks.size());
    return QString("no rank %1 (%2 has %3)")
        .arg(rank)
        .arg(e.s.label.toHtmlEscaped(),
             e.ranks.size() == 1 ? QString("only rank %1").arg(*e.ranks.begin())
             : whole             ? QString("ranks %1-%2").arg(*e.ranks.begin()).arg(*e.ranks.rbegin())
                                 : QString("%1 ranks").arg(e.ranks.size()));
  }
  return short_form ? QString("no snapshot") : QString("no snapshot of rank %1 at or before step %2").arg(rank).arg(step);
}

void MemoryCompare::fill_devices(int64_t step) {
  for (int row = 0; row < devices_->rowCount(); ++row) {
    const int32_t rank = devices_->verticalHeaderItem(row)->text().mid(5).toInt();
    double worst = -1;
    std::vector<double> frag(entries_.size(), -1);
    for (size_t i = 0; i < entries_.size(); ++i) {
      const auto* shown = snapshot_at(entries_[i].snapshots, rank, step);
      QString text = no_map_text(i, rank, step, true);
      if (shown) {
        auto it = entries_[i].figures.find(shown->id);
        if (it == entries_[i].figures.end())
          it = entries_[i].figures.emplace(shown->id, map_figures(entries_[i].s.session->memory_blocks(shown->id))).first;
        const MapFigures& f = it->second;
        frag[i] = f.fragmentation;
        worst = std::max(worst, f.fragmentation);
        text = QString("%1% (%2 of %3 free)")
                   .arg(100 * f.fragmentation, 0, 'f', 1)
                   .arg(QString::fromStdString(sessions::format_bytes(f.largest_free)),
                        QString::fromStdString(sessions::format_bytes(f.free)));
      }
      auto* item = new QTableWidgetItem(text);
      devices_->setItem(row, static_cast<int>(i), item);
    }
    for (size_t i = 0; i < entries_.size(); ++i)  // the worst of the row in bold when the sessions differ
      if (frag[i] >= 0 && frag[i] == worst && std::any_of(frag.begin(), frag.end(), [&](double v) { return v >= 0 && v != worst; })) {
        QFont f = devices_->font();
        f.setBold(true);
        devices_->item(row, static_cast<int>(i))->setFont(f);
      }
  }
}

}  // namespace embedscope::ui
