#include "views/memory_view.h"

#include <QApplication>

#include <QCheckBox>
#include <QFrame>
#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLayout>
#include <QScrollArea>
#include <QSlider>
#include <QSpinBox>
#include <QStyle>
#include <QSplitter>
#include <QTableWidget>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>
#include <qcustomplot.h>

#include "charts/colors.h"
#include "embedscope/engine/memory/snapshot_replay.h"
#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"
#include "jobs/analysis_job.h"
#include "charts/plot_axes.h"
#include "views/memory_entry_line.h"
#include "views/memory_replay.h"

namespace embedscope::ui {

namespace {
std::string fmt_rank(int32_t rank) { return "rank " + std::to_string(rank) + ":"; }
QString bytes(int64_t b) { return QString::fromStdString(sessions::format_bytes(b)); }
constexpr double kMiB = 1024.0 * 1024.0;

// The allocator settings as "key: value" lines (sessions::allocator_settings): an imported
// snapshot's allocator_settings, the memory section of a DLRM run's workload, or the engine's
// allocator an lm_embedding run records.
QString settings_text(const sessions::SessionReader& s, std::string* recorded, bool* pytorch) {
  const sessions::AllocatorSettings a = sessions::allocator_settings(s);
  *recorded = a.recorded;
  *pytorch = a.source == "PyTorch";
  if (a.source.empty()) return "allocator settings: not recorded";
  QString out;
  for (const auto& [key, value] : a.entries) {
    QString v = QString::fromStdString(value);
    // 0 reads as "split everything" (tester63a F15): say what it means, in PyTorch's words
    if (key == "max_split_size" && (v == "0" || v == "null"))
      v += " (unset, as PyTorch's max_split_size_mb unset: a free block of any size may be split)";
    else if (key == "max_split_size" && v.toLongLong() > 0)
      v = QString::fromStdString(sessions::format_bytes(v.toLongLong())) + " (larger blocks are never split)";
    else if (key == "compaction" && (v == "0" || v == "false"))
      v += " (off: no compaction)";
    out += QString("%1: %2\n").arg(QString::fromStdString(key), v);
  }
  return QString("allocator settings (%1)\n").arg(QString::fromStdString(a.source)) + out;
}
}  // namespace

MemoryViewData load_memory_view_data(const std::string& path, int32_t rank, int64_t columns) {
  const sessions::SessionReader r(path);
  MemoryViewData d;
  d.frames = r.memory_frames();
  d.stacks = r.memory_stacks();
  auto h = std::make_shared<sessions::MemoryHistory>(sessions::MemoryHistory::load(r, rank));
  d.analysis = sessions::analyze_memory_history(*h, rank, 8, d.frames, d.stacks);
  d.columns = sessions::active_timeline(*h, columns);
  d.segments = sessions::segment_timeline(*h, columns);
  d.capacity = engine::history_capacity(*h);
  if (d.capacity == 0)
    for (const auto& ri : r.ranks())
      if (ri.rank == rank) d.capacity = ri.memory_capacity_bytes;
  d.history = std::move(h);
  return d;
}

MemoryView::MemoryView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent)
    : QWidget(parent), session_(std::move(session)), counters_(session_->memory_counters()),
      snapshots_(session_->memory_snapshots()), rank_box_(new QComboBox(this)), snapshot_box_(new QComboBox(this)),
      summary_(new QLabel(this)), charts_(new QTabWidget(this)), timeline_(new ActiveTimeline(this)),
      segments_(new SegmentTimelineChart(this)), map_scroll_(new QScrollArea(this)),
      frag_plot_(new QCustomPlot(this)), plot_(new QCustomPlot(this)), slider_(new QSlider(Qt::Horizontal, this)),
      entry_box_(new QSpinBox(this)), entry_label_(new QLabel(this)), map_(new BlockMap(this)), why_(new QLabel(this)),
      details_(new QLabel(this)), stacks_table_(new QTableWidget(0, 4, this)), settings_(new QLabel(this)),
      replay_(new MemoryReplayPanel(this)), job_(new AnalysisJob(this)) {
  std::set<int32_t> ranks;
  for (const auto& c : counters_) ranks.insert(c.rank);
  if (ranks.empty())  // no counters: the ranks of the session (their events, if any, are read off the GUI thread)
    for (const auto& r : session_->ranks()) ranks.insert(r.rank);
  for (int32_t r : ranks) rank_box_->addItem(QString("rank %1").arg(r), r);
  const bool imported = session_->meta(sessions::meta::kImportFormat) == "torch_memory_snapshot";
  const int64_t warmup = std::atoll(session_->meta(sessions::meta::kWarmupSteps, "0").c_str());
  for (const auto& s : snapshots_)
    snapshot_box_->addItem(QString::fromStdString(sessions::snapshot_label(s, warmup, imported)));

  // the page scrolls inside its tab rather than raise the window's minimum size (tester56 F4:
  // the page drove the window to 1557x946, beyond a 1366x768 laptop); its parts are in splitters
  // The summary line above it, word-wrapped (one line of ~1300 px held the window that wide),
  // stays out of the scroll area: a height-for-width label in it makes QScrollArea size the page
  // to its preferred height, not its minimum.
  auto* outer = new QVBoxLayout(this);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel("memory of", this));
  top->addWidget(rank_box_);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->setWordWrap(true);
  top->addWidget(summary_, 1);
  outer->addLayout(top);
  auto* page = new QScrollArea(this);
  page->setObjectName("memory_page_scroll");
  page->setFrameShape(QFrame::NoFrame);
  page->setWidgetResizable(true);
  outer->addWidget(page, 1);
  auto* content = new QWidget(page);
  page->setWidget(content);
  auto* layout = new QVBoxLayout(content);
  layout->setContentsMargins(0, 0, 0, 0);

  auto* split = split_ = new QSplitter(Qt::Horizontal, this);
  split->setChildrenCollapsible(false);
  layout->addWidget(split, 1);
  // left: the charts over the trace above, the scrubber and the block map below, in a vertical
  // splitter whose largest share is the map's (the memory visualizer's main view: tester56 F4
  // found it a 15 px strip under the charts)
  auto* left = new QWidget(split);
  auto* lv = new QVBoxLayout(left);
  lv->setContentsMargins(0, 0, 0, 0);
  // tester43 F13: a run's weights (618.4 MiB of DLRM tables, live from entry 1 to the end) made
  // the per-step buffers a 2-3 px fringe; by default the chart starts above them
  // the segment timeline too (ux44): from the part of the oldest segment active for the whole trace
  // ui45: the segment timeline cuts static segments (the weights') out of its stack wherever they sit
  // short: a checkbox does not wrap, and its width held the right pane to ~400 px, cutting the
  // replay's result column (tester46 F15); the rest in the tooltip
  auto* baseline = new QCheckBox("leave out the memory live for the whole trace", left);
  baseline->setToolTip("the active timeline starts above it, the segment timeline cuts static segments out");
  baseline->setObjectName("memory_baseline");
  baseline->setChecked(timeline_->baseline_enabled());
  connect(baseline, &QCheckBox::toggled, timeline_, &ActiveTimeline::set_baseline_enabled);
  connect(baseline, &QCheckBox::toggled, segments_, &SegmentTimelineChart::set_baseline_enabled);
  lv->addWidget(baseline);
  auto* vsplit = charts_split_ = new QSplitter(Qt::Vertical, left);
  vsplit->setObjectName("memory_charts_split");
  vsplit->setChildrenCollapsible(false);
  lv->addWidget(vsplit, 1);
  timeline_->setMinimumHeight(kMemoryChartMinPx);
  segments_->setMinimumHeight(kMemoryChartMinPx);
  vsplit->addWidget(timeline_);
  vsplit->addWidget(segments_);
  // few value ticks (tester41 #8: eight tick labels crammed into 60 px overlapped)
  frag_plot_->setMinimumSize(320, kMemoryChartMinPx + 30);  // its legend row too
  plot_->setMinimumSize(320, kMemoryChartMinPx + 30);
  // and as many as the axis's height leaves apart, titles that fit it (tester59 F8)
  for (QCustomPlot* c : {frag_plot_, plot_}) keep_axes_readable(c, 4);
  charts_->addTab(frag_plot_, "fragmentation over the trace");
  charts_->addTab(plot_, "by step");
  vsplit->addWidget(charts_);
  auto* map_pane = new QWidget(vsplit);
  map_pane->setObjectName("memory_map_pane");
  auto* mv = new QVBoxLayout(map_pane);
  mv->setContentsMargins(0, 0, 0, 0);
  vsplit->addWidget(map_pane);
  // the scrubber and the snapshot picker, hidden where there is neither a history nor a snapshot
  auto* state_controls = new QWidget(map_pane);
  state_controls->setObjectName("memory_state_controls");
  auto* sc = new QVBoxLayout(state_controls);
  sc->setContentsMargins(0, 0, 0, 0);
  mv->addWidget(state_controls);
  auto* scrub = new QHBoxLayout;
  scrub->addWidget(new QLabel("allocator state after entry", this));
  scrub->addWidget(entry_box_);
  scrub->addWidget(slider_, 1);
  sc->addLayout(scrub);
  // the snapshot picker on the scrubber's row: a row less above the map
  slider_->setMinimumWidth(80);  // squeezed, it showed only its handle
  scrub->addWidget(new QLabel("or snapshot:", this));
  snapshot_box_->setToolTip("a snapshot the run recorded (step ends, OOMs)");
  scrub->addWidget(snapshot_box_);
  entry_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  entry_label_->setWordWrap(true);
  sc->addWidget(entry_label_);
  why_->setWordWrap(true);
  why_->setStyleSheet("color: #b00000");
  why_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  why_->hide();
  mv->addWidget(why_);
  map_scroll_->setWidget(map_);
  map_scroll_->setWidgetResizable(true);
  map_scroll_->setMinimumHeight(kMemoryMapMinPx + 2 * map_scroll_->frameWidth());  // the viewport at least kMemoryMapMinPx
  mv->addWidget(map_scroll_, 1);
  // shares of the height: the map's pane the largest (share_charts_split), until the user drags
  for (int i = 0; i < 4; ++i) vsplit->setStretchFactor(i, i == 3 ? 5 : 2);
  vsplit->installEventFilter(this);
  connect(vsplit, &QSplitter::splitterMoved, this, [this] { charts_split_dragged_ = true; });
  if (counters_.empty() && ranks.empty())
    lv->addWidget(new QLabel("this session has no memory records (schema version 1)", this));
  // right: the clicked block, the top stacks, the settings, the replay
  // in a scroll area of its own, its content as high as its wrapped lines at its width need
  // (fit_side_content): a layout counts a wrapped label's minimum as one short line, so at
  // 1280x800 the replay's verdicts were drawn over its table and past the pane's bottom
  side_scroll_ = new QScrollArea(split);
  side_scroll_->setObjectName("memory_side_scroll");
  side_scroll_->setFrameShape(QFrame::NoFrame);
  side_scroll_->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  side_scroll_->setWidgetResizable(false);  // fit_side_content sizes it
  auto* right = side_ = new QWidget;
  auto* rv = new QVBoxLayout(right);
  rv->setContentsMargins(0, 0, 0, 0);
  details_->setWordWrap(true);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  details_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  details_->setText("click a block on the map: its stack, size, requested size and the entry that made it");
  rv->addWidget(details_, 2);
  // a header that fits the pane at 1280x800 (tester63a F13: it read "ocating stack (innermost frame; hover:")
  stacks_table_->setObjectName("memory_stacks");
  stacks_table_->setHorizontalHeaderLabels({"held", "bytes", "blocks", "allocating stack (hover: all)"});
  stacks_table_->horizontalHeaderItem(3)->setToolTip("each row: the innermost frame of the allocating stack; hover a "
                                                     "cell for all its frames");
  stacks_table_->horizontalHeader()->setStretchLastSection(true);
  stacks_table_->verticalHeader()->hide();
  stacks_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  // its header and two rows at least; more height goes to it first
  stacks_table_->setMinimumHeight(stacks_table_->horizontalHeader()->sizeHint().height() +
                                  2 * stacks_table_->verticalHeader()->defaultSectionSize() + 2 * stacks_table_->frameWidth() + 4);
  rv->addWidget(stacks_table_, 3);
  std::string recorded;
  settings_->setObjectName("allocator_settings");
  bool pytorch = false;
  settings_->setText(settings_text(*session_, &recorded, &pytorch));
  settings_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  settings_->setWordWrap(true);
  rv->addWidget(settings_);
  rv->addWidget(replay_, 2);
  side_scroll_->setWidget(right);
  // the pane no narrower than its content's least width (the replay's controls), its scroll bar beside it
  side_scroll_->setMinimumWidth(rv->totalMinimumSize().width() + style()->pixelMetric(QStyle::PM_ScrollBarExtent) + 2);
  right->installEventFilter(this);  // its layout asks for a new size: refit
  side_scroll_->viewport()->installEventFilter(this);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  slider_->setEnabled(false);
  entry_box_->setEnabled(false);
  replay_->setProperty("recorded", QString::fromStdString(recorded));
  replay_->set_pytorch_program(pytorch);  // an imported snapshot's OOM is not given the workload's remedies

  connect(rank_box_, &QComboBox::currentIndexChanged, this, [this](int i) { show_rank(rank_box_->itemData(i).toInt()); });
  connect(replay_, &MemoryReplayPanel::replayed, this, [this] {
    if (report_) fit_side_pane();
  });
  connect(snapshot_box_, &QComboBox::currentIndexChanged, this, [this](int i) { show_snapshot(i); });
  connect(slider_, &QSlider::valueChanged, this, [this](int v) { scrub_to(v); });
  connect(entry_box_, &QSpinBox::valueChanged, this, [this](int v) { scrub_to(v); });
  connect(timeline_, &ActiveTimeline::entry_clicked, this, [this](int64_t e) { scrub_to(e); });
  connect(segments_, &SegmentTimelineChart::entry_clicked, this, [this](int64_t e) { scrub_to(e); });
  connect(segments_, &SegmentTimelineChart::segment_clicked, this,
          [this](int64_t e, int64_t address) { show_segment(e, address); });
  connect(map_, &BlockMap::block_clicked, this, [this](int i) { show_block(i); });
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
    QSignalBlocker block(snapshot_box_);
    snapshot_box_->setCurrentIndex(first);
    show_snapshot(first);
  }
}

bool MemoryView::eventFilter(QObject* watched, QEvent* e) {
  if (side_scroll_ && ((watched == side_ && e->type() == QEvent::LayoutRequest) ||
                       (watched == side_scroll_->viewport() && e->type() == QEvent::Resize)))
    fit_side_content();
  if (watched == charts_split_ && e->type() == QEvent::Resize && !charts_split_dragged_)
    QTimer::singleShot(0, this, [this] { share_charts_split(); });  // after the splitter's own layout
  return QWidget::eventFilter(watched, e);
}

int side_content_height(QWidget* content, int width, int viewport_height) {
  QLayout* l = content->layout();
  if (!l) return viewport_height;
  const int least = l->hasHeightForWidth() ? l->totalMinimumHeightForWidth(width) : l->totalMinimumSize().height();
  return std::max(viewport_height, least);
}

void MemoryView::fit_side_content() {
  QWidget* vp = side_scroll_->viewport();
  const int w = std::max(vp->width(), side_->layout()->totalMinimumSize().width());
  const QSize want(w, side_content_height(side_, w, vp->height()));
  if (side_->size() != want) side_->resize(want);
}

std::array<int, 4> memory_split_sizes(int height, int map_pane_min, int map_pane_wants) {
  const int pane = std::min(height, std::max(map_pane_min, std::min(map_pane_wants, height * 45 / 100)));
  const int rest = height - pane;
  return {rest * 35 / 100, rest * 27 / 100, rest - rest * 35 / 100 - rest * 27 / 100, pane};
}

void MemoryView::share_charts_split() {
  if (charts_split_dragged_ || charts_split_->count() != 4) return;
  const int h = charts_split_->height() - 3 * charts_split_->handleWidth();
  if (h <= 0) return;
  QWidget* pane = charts_split_->widget(3);
  // the scrubber's rows and the OOM line at the pane's width (the entry line wraps), then the map
  const int spacing = pane->layout()->spacing(), w = pane->width();
  int above = 0;
  for (QWidget* part : {findChild<QWidget*>("memory_state_controls"), static_cast<QWidget*>(why_)})
    if (part && part->isVisibleTo(pane))
      above += (part->hasHeightForWidth() ? part->heightForWidth(w) : part->sizeHint().height()) + spacing;
  const int least = above + map_scroll_->minimumHeight();
  pane->setMinimumHeight(least);  // the splitter's minimum for the pane, the wrapped lines counted
  const auto sizes = memory_split_sizes(h, least, above + map_->minimumHeight() + 2 * map_scroll_->frameWidth());
  charts_split_->setSizes({sizes[0], sizes[1], sizes[2], sizes[3]});  // QSplitter keeps each at least its minimum
}

void MemoryView::show_rank(int rank) {
  if (rank == rank_) return;
  rank_ = rank;
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
  f->setName("fragmentation % at step end");
  f->setData(steps, frag);
  f->setPen(QPen(QColor(0x7f, 0x7f, 0x7f), 1, Qt::DashLine));
  plot_->xAxis->setLabel("step (negative: warm-up)");
  auto ticker = QSharedPointer<QCPAxisTickerFixed>(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);  // integer steps only
  plot_->xAxis->setTicker(ticker);
  plot_->yAxis->setLabel("MiB");
  plot_->legend->setVisible(true);
  plot_->rescaleAxes(true);
  plot_->yAxis->setRangeLower(0);
  plot_->yAxis->setRangeUpper(plot_->yAxis->range().upper * 1.1);
  plot_->yAxis2->setVisible(true);
  set_label_choices(plot_->yAxis2, fragmentation_label_choices());
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
  // the history of the rank, off the GUI thread
  data_ = MemoryViewData{};
  state_ = sessions::MemoryState{};
  timeline_->set_data(nullptr, {}, {}, {});
  segments_->set_data(nullptr, {}, {}, {});
  summary_->setText("reading the allocator history ...");
  const std::string path = session_->path();
  job_->start<MemoryViewData>([path, rank] { return load_memory_view_data(path, rank); },
                              [this](MemoryViewData& d) { apply(d); },
                              [this](const QString& e) {
                                // the error in place of the charts it leaves empty (tester43 F10: both
                                // timelines said "computing..." and the replay offered a 1 MiB device)
                                summary_->setText("the allocator history is unreadable: " + e);
                                timeline_->hide();
                                segments_->hide();
                                replay_->hide();
                                if (auto* b = findChild<QWidget*>("memory_baseline")) b->hide();
                              });
}

void MemoryView::apply(MemoryViewData& d) {
  data_ = std::move(d);
  replay_->show();
  const auto& h = *data_.history;
  const auto& a = data_.analysis;
  {  // distinct colours for this rank's tags (tester43 F6), before anything paints them
    std::vector<std::string> tags;
    for (const auto& al : h.allocations()) tags.push_back(al.tag);
    BlockMap::use_tag_colors(std::move(tags));
  }
  timeline_->set_data(data_.history, data_.columns, data_.frames, data_.stacks);
  segments_->set_data(data_.history, data_.segments, data_.frames, data_.stacks, timeline_->baseline_bytes());
  if (h.size() == 0) {
    // the replay box offers the device's capacity (it has no history to replay), else what the
    // rank's counters say was reserved (a snapshot's dump: tester37 #8 offered 1 MiB for 2 MiB)
    int64_t reserved = 0;
    for (const auto& c : counters_)
      if (c.rank == rank_) reserved = std::max({reserved, c.reserved, c.peak_reserved});
    replay_->set_history(data_.history, data_.capacity, reserved, replay_->property("recorded").toString().toStdString());
    const bool snapshot = session_->meta(sessions::meta::kImportFormat, "") == "torch_memory_snapshot";
    charts_->setVisible(!snapshot);  // a snapshot's counters over steps: one point at the dump, no axis to read
    if (snapshot)  // segments but no trace: the dump was taken without recording the history (tester37 #8)
      summary_->setText(QString("no trace entries: memory history was not recorded (call "
                                "torch.cuda.memory._record_memory_history() before the workload, then "
                                "_dump_snapshot()); the segments at the dump below, %1 reserved")
                            .arg(QString::fromStdString(sessions::format_bytes(reserved))));
    else if (session_->meta(sessions::meta::kSimulated, "") == "1") {
      // an lm_embedding session's estimate is the LM one (tester43 F19 named the DLRM replay)
      const auto w = nlohmann::json::parse(session_->meta(sessions::meta::kWorkloadJson, "{}"), nullptr, false);
      const bool lm = w.is_object() && w.value("model", "") == "lm_embedding";
      // a DLRM session's counters are the replay's allocator at each step end (tester51 F7)
      summary_->setText(QString("simulated: the memory estimate of each step (%1), %2; no allocator events or snapshots")
                            .arg(lm ? "planner/lm_memory_estimate.h" : "planner/memory_replay.h",
                                 lm ? "its allocator replay's peak allocated and reserved" : "its allocator's figures at each step end"));
    } else
      summary_->setText(counters_.empty() ? "" : "no allocator events: the recorded snapshots below");
    charts_->setCurrentWidget(plot_);
    timeline_->hide();
    segments_->hide();
    if (auto* b = findChild<QWidget*>("memory_baseline")) b->hide();
    if (snapshots_.empty()) {  // nothing to scrub, map, click or replay: only the chart by step (tester43 F19)
      for (QWidget* empty : {static_cast<QWidget*>(map_scroll_), static_cast<QWidget*>(details_),
                             static_cast<QWidget*>(stacks_table_), static_cast<QWidget*>(replay_)})
        empty->hide();
      if (auto* c = findChild<QWidget*>("memory_state_controls")) c->hide();
    }
    return;
  }
  timeline_->show();
  segments_->show();
  charts_->show();
  for (QWidget* part : {static_cast<QWidget*>(map_scroll_), static_cast<QWidget*>(details_), static_cast<QWidget*>(stacks_table_)})
    part->show();
  for (const char* name : {"memory_state_controls", "memory_baseline"})
    if (auto* c = findChild<QWidget*>(name)) c->show();
  charts_->setCurrentWidget(frag_plot_);
  // each fragmentation figure named by its moment (tester41 #7): at peak allocated (this line's
  // layout), at peak reserved (the Replay panel's moment); the Summary's is the worst step end
  QString sum = QString("%1 events; peak allocated %2 at entry %3 (reserved %4): fragmentation at peak allocated "
                        "%6%, largest free block %7, %8 lost to rounding; peak reserved %5 at entry %9: "
                        "fragmentation at peak reserved %10%")
                    .arg(a.entries)
                    .arg(bytes(a.peak_allocated))
                    .arg(a.peak_entry)
                    .arg(bytes(a.at_peak.reserved), bytes(a.peak_reserved))
                    .arg(100 * a.at_peak.external_fragmentation, 0, 'f', 1)
                    .arg(bytes(a.at_peak.largest_free_block), bytes(a.rounding_loss_at_peak))
                    .arg(a.peak_reserved_entry)
                    .arg(100 * a.at_peak_reserved.external_fragmentation, 0, 'f', 1);
  if (!a.ooms.empty()) sum += QString("; %1 OOM%2").arg(a.ooms.size()).arg(a.ooms.size() == 1 ? "" : "s");
  if (!a.starts_empty) sum += "; the trace starts mid-way";
  summary_->setText(sum);
  fill_fragmentation();
  fill_stacks();
  replay_->set_history(data_.history, data_.capacity, a.peak_reserved, replay_->property("recorded").toString().toStdString());
  if (a.starts_empty) {  // a trace that starts mid-way is not the whole recording: nothing to compare
    replay_->set_recorded_at_peak_reserved(a.peak_reserved_entry, a.at_peak_reserved.external_fragmentation, a.peak_reserved);
    // how it ended, as replay-memory compares it (snap54, tester54 F9): its OOM, and a snapshot's
    // dump (the rank's counter at the dump: its segments and reserved bytes)
    int64_t dump_segments = -1, dump_reserved = -1;
    if (session_->meta(sessions::meta::kImportFormat, "") == "torch_memory_snapshot")
      for (const auto& c : counters_)
        if (c.rank == rank_) dump_segments = c.segments, dump_reserved = c.reserved;
    replay_->set_recorded_outcome(a.ooms.empty() ? -1 : a.ooms.front().entry, dump_segments, dump_reserved);
  }
  {
    const QSignalBlocker b1(slider_), b2(entry_box_);
    slider_->setRange(0, static_cast<int>(h.size() - 1));
    slider_->setPageStep(std::max<int>(1, static_cast<int>(h.size() / 50)));
    entry_box_->setRange(0, static_cast<int>(h.size() - 1));
  }
  slider_->setEnabled(true);
  entry_box_->setEnabled(true);
  scrub_to(a.ooms.empty() ? a.peak_entry : a.ooms.front().entry);  // the question a user comes with
}

void MemoryView::scrub_to(int64_t entry) {
  if (!data_.history || data_.history->size() == 0) return;
  const auto& h = *data_.history;
  entry = std::clamp<int64_t>(entry, 0, h.size() - 1);
  if (state_.entry != entry || state_.segments.empty()) state_ = h.state_at(entry);
  {
    const QSignalBlocker b1(slider_), b2(entry_box_);
    slider_->setValue(static_cast<int>(entry));
    entry_box_->setValue(static_cast<int>(entry));
  }
  map_->set_blocks(h.blocks_of(state_));
  timeline_->set_cursor(entry);
  segments_->set_cursor(entry);
  entry_label_->setText(memory_entry_line(h, entry, state_, data_.analysis.ooms));
  why_->hide();
}

void MemoryView::show_for_report() {
  if (!data_.history || data_.history->size() == 0) return;
  const auto& layout = map_->layout();
  int largest = -1;
  for (size_t i = 0; i < layout.size(); ++i)
    if (layout[i].block.allocated &&
        (largest < 0 || layout[i].block.size > layout[static_cast<size_t>(largest)].block.size))
      largest = static_cast<int>(i);
  show_block(largest);
  report_ = true;
  fit_side_pane();
  replay_->replay();
}

int finish_shown_memory_pages(QWidget* root, int timeout_ms) {
  int shown = 0;
  for (MemoryView* view : root->findChildren<MemoryView*>()) {
    if (!view->isVisible()) continue;
    wait_for_analyses(view, timeout_ms);  // the history first: the replay needs it
    view->replay()->replay();  // as its Replay button: the panes keep their widths
    wait_for_analyses(view, timeout_ms);
    ++shown;
  }
  // the rows and the labels' wrapped heights laid out before the grab: a label's new minimum
  // height is a new layout, a few rounds deep
  for (int round = 0; round < 4; ++round) {
    for (QLayout* l : root->findChildren<QLayout*>()) l->activate();
    QApplication::processEvents();
  }
  return shown;
}

void MemoryView::fit_side_pane() {
  // each table's columns at their contents' (or header's) width, as resizeColumnsToContents sets them
  auto natural = [](QTableWidget* t) {
    int w = 2 * t->frameWidth() + 4;
    for (int c = 0; c < t->columnCount(); ++c)
      w += std::max(static_cast<const QAbstractItemView*>(t)->sizeHintForColumn(c), t->horizontalHeader()->sectionSizeHint(c));
    return w;
  };
  const QList<int> sizes = split_->sizes();
  if (sizes.size() != 2) return;
  const int total = sizes[0] + sizes[1];
  const int right = std::min(std::max({natural(stacks_table_), natural(replay_->table()), sizes[1]}), total / 2);
  if (right > sizes[1]) split_->setSizes({total - right, right});
}

void MemoryView::show_segment(int64_t entry, int64_t segment_address) {
  scrub_to(entry);
  map_->highlight_segment(segment_address);
  const int row = map_->row_of_segment(segment_address);
  if (row < 0) return;
  const QRect r = map_->row_rect(row);
  map_scroll_->ensureVisible(r.center().x(), r.center().y(), 0, r.height());
  const auto& segs = data_.segments.segments;
  const auto it = std::find_if(segs.begin(), segs.end(), [&](const sessions::SegmentLife& s) {
    return static_cast<int64_t>(s.address) == segment_address && sessions::segment_live_at(s, state_.entry);
  });
  const auto& cols = data_.segments.columns;
  const auto col = std::find_if(cols.begin(), cols.end(), [&](const sessions::SegmentColumn& c) { return c.entry == entry; });
  if (it != segs.end())
    details_->setText(segments_->describe(static_cast<int32_t>(it - segs.begin()),
                                          col == cols.end() ? -1 : static_cast<int>(col - cols.begin())));
}

void MemoryView::show_block(int index) {
  const auto& layout = map_->layout();
  if (index < 0 || static_cast<size_t>(index) >= layout.size()) return;
  const sessions::MemoryBlockRecord& b = layout[static_cast<size_t>(index)].block;
  if (!b.allocated) {
    details_->setText(QString("free block of %1 at %2 in the segment at %3 (%4)%5")
                          .arg(bytes(b.size))
                          .arg(static_cast<qulonglong>(b.address), 0, 16)
                          .arg(static_cast<qulonglong>(b.segment_address), 0, 16)
                          .arg(bytes(b.segment_size))
                          .arg(layout[static_cast<size_t>(index)].largest_free ? ": the largest free block" : ""));
    return;
  }
  int32_t a = -1;
  if (data_.history && state_.entry >= 0) a = data_.history->allocation_at(state_, static_cast<uint64_t>(b.address));
  if (a >= 0 && data_.history->allocations()[static_cast<size_t>(a)].address == static_cast<uint64_t>(b.address)) {
    const auto& al = data_.history->allocations()[static_cast<size_t>(a)];
    QString made = al.alloc_entry >= 0 ? QString("made by entry %1 (alloc)").arg(al.alloc_entry)
                                       : QString("live before the first entry of the trace");
    details_->setText(QString("block at %1, %2\n%3\n\n%4")
                          .arg(static_cast<qulonglong>(b.address), 0, 16)
                          .arg(b.pending_free ? "its free pending on another stream" : "allocated")
                          .arg(made)
                          .arg(timeline_->describe(a)));
    return;
  }
  // a recorded snapshot's block (no history entry made it)
  QString text = QString("%1: %2 (requested %3) at %4")
                     .arg(QString::fromStdString(b.tag), bytes(b.size), bytes(b.requested))
                     .arg(static_cast<qulonglong>(b.address), 0, 16);
  for (const auto& f : sessions::stack_frames(b.stack_id, data_.frames, data_.stacks))
    text += "\n  " + QString::fromStdString(f);
  details_->setText(text);
}

QString MemoryView::oom_free_block_legend(const std::vector<sessions::MemoryOom>& ooms) {
  bool other = false, small = false, large = false;
  for (const auto& o : ooms) {
    other |= o.largest_free_in_pool != o.largest_free_block;
    (o.small_pool ? small : large) = true;
  }
  if (!other) return "OOM: largest free block then";
  if (small && !large) return "OOM: the small pool's largest free block then (it serves requests <= 1 MiB)";
  if (large && !small) return "OOM: the large pool's largest free block then (it serves requests > 1 MiB)";
  return "OOM: the largest free block of the request's pool then (small: <= 1 MiB, large: above)";
}

void MemoryView::fill_fragmentation() {
  QCustomPlot* p = frag_plot_;
  p->clearGraphs();
  p->clearItems();
  QVector<double> x, frag, largest;
  for (const auto& c : data_.columns) {
    x << static_cast<double>(c.entry);
    frag << 100 * c.figures.external_fragmentation;
    largest << static_cast<double>(c.figures.largest_free_block) / kMiB;
  }
  auto* g1 = p->addGraph(p->xAxis, p->yAxis);
  g1->setName("largest free block");
  g1->setData(x, largest);
  g1->setPen(QPen(QColor(0x2c, 0xa0, 0x2c), 2));
  auto* g2 = p->addGraph(p->xAxis, p->yAxis2);
  g2->setName("fragmentation % (right axis)");
  g2->setData(x, frag);
  g2->setPen(QPen(QColor(0x7f, 0x7f, 0x7f), 1, Qt::DashLine));
  QVector<double> ox, req, lf;
  for (const auto& o : data_.analysis.ooms) {
    ox << static_cast<double>(o.entry);
    req << static_cast<double>(o.requested) / kMiB;
    // the largest free block of the pool that serves the request (PyTorch: <= 1 MiB the small
    // pool): the other pool's blocks cannot serve it (tester46 F22: 16.4 MiB drawn over a 16 KiB
    // request the small pool, with 0 B free, failed)
    lf << static_cast<double>(o.largest_free_in_pool) / kMiB;
    auto* line = new QCPItemStraightLine(p);
    line->point1->setCoords(static_cast<double>(o.entry), 0);
    line->point2->setCoords(static_cast<double>(o.entry), 1);
    line->setPen(QPen(Qt::red, 1, Qt::DotLine));
  }
  if (!ox.isEmpty()) {
    auto* r = p->addGraph(p->xAxis, p->yAxis);
    r->setName("OOM: the request");
    r->setData(ox, req);
    r->setLineStyle(QCPGraph::lsNone);
    r->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, Qt::red, 10));
    auto* l = p->addGraph(p->xAxis, p->yAxis);
    l->setName(oom_free_block_legend(data_.analysis.ooms));
    l->setData(ox, lf);
    l->setLineStyle(QCPGraph::lsNone);
    l->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QColor(0x2c, 0xa0, 0x2c), 9));
  }
  p->xAxis->setLabel("trace entry");
  set_label_choices(p->yAxis, {"MiB"});
  p->yAxis2->setVisible(true);
  set_label_choices(p->yAxis2, fragmentation_label_choices());
  // the legend in a row of its own under the chart, not over the lines
  p->legend->setVisible(true);
  p->legend->setFont(QFont(font().family(), std::max(7, font().pointSize() - 1)));
  if (p->plotLayout()->rowCount() == 1) {
    p->plotLayout()->addElement(1, 0, p->legend);
    p->plotLayout()->setRowStretchFactor(1, 0.001);
    p->legend->setFillOrder(QCPLegend::foColumnsFirst);
    p->legend->setWrap(2);
  }
  p->rescaleAxes();
  const double n = std::max<double>(1, static_cast<double>(data_.history->size()));
  p->xAxis->setRange(-0.01 * n, 1.02 * n);  // an OOM at the last entry stays in view
  p->yAxis->setRange(0, std::max(1.0, p->yAxis->range().upper * 1.1));
  // tester43 F13: the largest free block of the first entries (a fresh segment before the
  // weights fill it: 600 MiB at entry 0) flattened the rest to a line at ~5 MiB: the axis is
  // scaled to the entries after the first 1% (and every OOM's points), the clipped start said
  const int64_t skip = std::max<int64_t>(1, data_.history->size() / 100);
  double late = 0, all = 0;
  for (int i = 0; i < x.size(); ++i) {
    all = std::max(all, largest[i]);
    if (x[i] >= static_cast<double>(skip)) late = std::max(late, largest[i]);
  }
  for (int i = 0; i < ox.size(); ++i) late = std::max({late, req[i], lf[i]});
  if (late > 0 && all > 2 * late) {
    p->yAxis->setRange(0, late * 1.1);
    set_label_choices(p->yAxis, clipped_scale_label_choices(skip));  // the first entries' peak clipped
  }
  p->yAxis2->setRange(0, 100);
  follow_palette(p);
  if (p->isVisible()) p->replot();
}

QString clipped_scale_label(int64_t skip) {
  if (skip <= 1) return "MiB (scaled to entries 1 on: entry 0 clipped)";
  return QString("MiB (scaled to entries %1 on: entries 0-%2, the first 1%, clipped)").arg(skip).arg(skip - 1);
}

QStringList clipped_scale_label_choices(int64_t skip) {
  const QString full = clipped_scale_label(skip);
  const qsizetype colon = full.indexOf(": ");
  return {full, full.left(colon + 1) + "\n" + full.mid(colon + 2),
          skip <= 1 ? QString("MiB (entry 0 clipped)") : QString("MiB (entries 0-%1 clipped)").arg(skip - 1), "MiB"};
}

QStringList fragmentation_label_choices() { return {"fragmentation %", "frag. %", "%"}; }

void MemoryView::fill_stacks() {
  const auto& a = data_.analysis;
  stacks_table_->setRowCount(0);
  auto add = [&](const QString& where, const std::vector<sessions::MemoryStackHeld>& held) {
    for (const auto& s : held) {
      const int row = stacks_table_->rowCount();
      stacks_table_->insertRow(row);
      const QStringList cells{where, bytes(s.bytes), QString::number(s.blocks), QString::fromStdString(s.name)};
      for (int c = 0; c < cells.size(); ++c) {
        auto* item = new QTableWidgetItem(cells[c]);
        if (c == 3) {
          QString tip;
          for (const auto& f : sessions::stack_frames(s.stack_id, data_.frames, data_.stacks))
            tip += QString::fromStdString(f) + "\n";
          item->setToolTip(tip.trimmed());
          // the block map's colour of the blocks it holds (their tag is the innermost function)
          item->setData(Qt::DecorationRole, BlockMap::color_of_tag(s.stack_id > 0 ? s.name.substr(0, s.name.find(" (")) : s.name));
        }
        stacks_table_->setItem(row, c, item);
      }
    }
  };
  add(QString("at the peak (entry %1)").arg(a.peak_entry), a.top_stacks_at_peak);
  for (const auto& o : a.ooms) add(QString("at the OOM (entry %1)").arg(o.entry), o.top_stacks);
  stacks_table_->resizeColumnsToContents();
}

void MemoryView::show_snapshot(int index) {
  if (index < 0 || static_cast<size_t>(index) >= snapshots_.size()) return;
  const auto& sn = snapshots_[static_cast<size_t>(index)];
  auto blocks = session_->memory_blocks(sn.id);
  {
    std::vector<std::string> tags;
    for (const auto& b : blocks)
      if (b.allocated) tags.push_back(b.tag);
    BlockMap::use_tag_colors(std::move(tags));  // tester43 F6
  }
  map_->set_blocks(std::move(blocks));
  state_ = sessions::MemoryState{};  // the map shows the recorded snapshot, not a replayed state
  if (const int i = rank_box_->findData(sn.rank); i >= 0 && i != rank_box_->currentIndex())
    rank_box_->setCurrentIndex(i);  // the chart follows the snapshot's rank
  const std::string msg = session_->meta(sessions::meta::kEndMessage);
  const bool oom = sn.reason == "oom" && msg.rfind(fmt_rank(sn.rank), 0) == 0;
  why_->setText(oom ? QString::fromStdString(session_->meta(sessions::meta::kEndMessage)) : QString());
  why_->setVisible(oom);
  entry_label_->setText(QString("the recorded snapshot: %1").arg(snapshot_box_->itemText(index)));
}

}  // namespace embedscope::ui
