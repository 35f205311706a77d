#include "timeline/timeline_widget.h"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <vector>
#include <utility>

#include "charts/colors.h"
#include "core/kernel_name.h"
#include "core/lane_labels.h"
#include "core/timeline_nav.h"
#include "embedscope/engine/sharding/sharding.h"  // format_bytes
#include "embedscope/sessions/analysis/analysis.h"  // rank_list
#include "embedscope/sessions/analysis/gpu_sharing.h"
#include "embedscope/sessions/model/did_not_end.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

namespace {
/// The outline of an op that did not end: near-black, drawn over any category's colour.
QColor did_not_end_color() { return QColor(0x20, 0x20, 0x20); }

// The union of sorted, disjoint interval lists (merge_intervals' result for their concatenation):
// merged pairwise in place by start, then joined where they touch or overlap.
std::vector<sessions::Interval> unite(std::vector<std::vector<sessions::Interval>> parts) {
  std::vector<sessions::Interval> all;
  for (auto& p : parts) {
    const auto mid = static_cast<std::ptrdiff_t>(all.size());
    all.insert(all.end(), p.begin(), p.end());
    std::inplace_merge(all.begin(), all.begin() + mid, all.end(),
                       [](const sessions::Interval& a, const sessions::Interval& b) { return a.start < b.start; });
  }
  std::vector<sessions::Interval> out;
  for (const auto& i : all) {
    if (!out.empty() && i.start <= out.back().end)
      out.back().end = std::max(out.back().end, i.end);
    else
      out.push_back(i);
  }
  return out;
}

template <class T>
QString join(const std::vector<T>& v) {
  QStringList parts;
  for (const auto& x : v) parts << QString::number(x);
  return parts.join(", ");
}
}  // namespace

TimelineWidget::TimelineWidget(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent)
    : QWidget(parent), session_(std::move(session)), scale_(0, 1, 800) {
  // every op of each lane in one read (the packed op_blocks of a closed session, else one range
  // query of the clustered (lane, start) key): no regrouping of every op
  constexpr int64_t kAll = std::numeric_limits<int64_t>::max() / 4;
  int64_t begin = std::numeric_limits<int64_t>::max(), end = 0;
  // per rank: its communication (set-up waits below) and the union of its compute ops (drawn
  // under communication as hidden), each row's union taken in one pass (a row is sorted by start)
  std::map<int32_t, std::vector<std::vector<sessions::Interval>>> compute;
  std::map<int32_t, int64_t> first_start;
  std::map<int32_t, std::vector<ViewRange>> comm;
  // a row of a lane: its ops (sorted by start), their extent, communication and compute union
  std::set<int32_t> stream_ranks;
  for (const auto& l : session_->lanes())
    if (l.kind == "stream") stream_ranks.insert(l.rank);
  auto add_row = [&](const sessions::LaneInfo& l, const QString& lane, std::vector<sessions::OpRecord> lane_ops) {
    LaneIndex index(lane_ops);
    rows_.push_back({l.rank, l.lane, lane, QString("rank %1 %2").arg(l.rank).arg(lane), std::move(lane_ops), std::move(index), {},
                     l.kind == "sync" || l.name == "gpu_sync", l.kind == "annotation", {}});
    const auto& ops = rows_.back().ops;
    // ops that did not end: marked; inside the extent, so that one can pan to a marker outside
    // the valid events' range, but not busy time or communication
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].start_ns == ops[i].end_ns && sessions::did_not_end(ops[i].start_ns, ops[i].end_ns, session_->name(ops[i].name_id)))
        rows_.back().did_not_end.push_back(i);
    const auto& unfinished = rows_.back().did_not_end;
    if (ops.empty()) return;
    begin = std::min(begin, ops.front().start_ns);
    size_t first_valid = 0;  // a rank's start (set-up waits) is its first op that ran
    while (first_valid < ops.size() && std::binary_search(unfinished.begin(), unfinished.end(), first_valid)) ++first_valid;
    if (first_valid < ops.size()) {
      auto [first, fresh] = first_start.try_emplace(l.rank, ops[first_valid].start_ns);
      if (!fresh) first->second = std::min(first->second, ops[first_valid].start_ns);
    }
    std::vector<sessions::Interval> busy;  // merge_intervals of the row's compute ops, without its sort
    for (size_t i = 0, next_unfinished = 0; i < ops.size(); ++i) {
      const auto& o = ops[i];
      end = std::max(end, o.end_ns);
      if (next_unfinished < unfinished.size() && unfinished[next_unfinished] == i) {
        ++next_unfinished;  // no time: not busy time or communication
        continue;
      }  // an imported lane's ops may nest: the last need not end last
      if (o.category == sessions::OpCategory::comm) {
        comm[o.rank].push_back({o.start_ns, o.end_ns});
      } else if (o.category != sessions::OpCategory::memcpy && o.end_ns > o.start_ns) {
        if (!busy.empty() && o.start_ns <= busy.back().end)
          busy.back().end = std::max(busy.back().end, o.end_ns);
        else
          busy.push_back({o.start_ns, o.end_ns});
      }
    }
    // a rank with GPU streams: what hides its communication is its streams' compute, not its
    // host spans (sessions/analysis: analyze, RunStats::stream_ranks)
    // (NVTX ranges, lanes of kind `annotation`, enclose work: not compute)
    if (l.kind != "annotation" && (!stream_ranks.count(l.rank) || l.kind == "stream"))
      compute[l.rank].push_back(std::move(busy));
  };
  // a GPU sync waits row without a wait that took time or did not end: not drawn (ux41 #12: an
  // empty "GPU sync waits (overlap)" row of a session without sync waits); other empty lanes
  // keep their rows (a lane the run had, idle)
  auto no_waits = [&](const sessions::LaneInfo& l, const std::vector<sessions::OpRecord>& ops) {
    if (l.kind != "sync" && l.name != "gpu_sync") return false;
    return std::none_of(ops.begin(), ops.end(), [&](const sessions::OpRecord& o) {
      return o.end_ns > o.start_ns || sessions::did_not_end(o.start_ns, o.end_ns, session_->name(o.name_id));
    });
  };
  std::vector<LaneLabelInput> label_rows;  // rows_ in order
  // ranks that share a GPU: their comm stream holds the intra-device communicator's copies
  const std::vector<sessions::RankGpu> gpus = sessions::rank_gpus(session_->ranks());
  std::map<int32_t, QString> shared_note;
  for (const auto& g : gpus)
    if (g.ranks.size() > 1)
      for (int32_t r : g.ranks)
        shared_note[r] = QString::fromStdString(shared_gpu_comm_note(sessions::rank_list(g.ranks), g.device, gpus.size() > 1));
  for (const auto& l : session_->lanes()) {
    const QString lane = QString::fromStdString(l.name);
    auto lane_ops = session_->lane_ops(l.rank, l.lane);
    // what ops(rank, lane, -kAll, kAll) gives
    std::erase_if(lane_ops, [](const sessions::OpRecord& o) { return o.start_ns >= kAll || o.end_ns <= -kAll; });
    // spans that partially overlap another of the lane (imported traces) go on an overflow row
    auto overflow = take_partial_overlaps(lane_ops);
    const auto note = l.name == "gpu_comm" ? shared_note.find(l.rank) : shared_note.end();
    const bool shares = note != shared_note.end();
    if (!no_waits(l, lane_ops)) {
      add_row(l, lane, std::move(lane_ops));
      label_rows.push_back({l.rank, l.name, false, shares});
      if (shares) rows_.back().gpu_note = note->second;
    }
    if (!overflow.empty() && !no_waits(l, overflow)) {
      add_row(l, lane + " (overlapping)", std::move(overflow));
      label_rows.push_back({l.rank, l.name, true, shares});
      if (shares) rows_.back().gpu_note = note->second;
    }
  }
  // short labels that tell the rows apart (an import's "annot. stream 7" / "annot. stream 40");
  // the whole name on hover
  const std::vector<std::string> labels = lane_labels(label_rows);
  for (size_t i = 0; i < rows_.size(); ++i) rows_[i].label = QString::fromStdString(labels[i]);
  const auto steps = session_->steps();
  for (const auto& st : steps) {
    begin = std::min(begin, st.start_ns);
    end = std::max(end, st.end_ns);
  }
  if (begin > end) begin = end = 0;
  for (auto& [rank, rows] : compute) compute_[rank] = unite(std::move(rows));
  steps_ = step_windows(steps);
  std::set<int64_t> starts;
  for (const auto& st : steps)
    if (st.rank == 0) starts.insert(st.start_ns);
  step_starts_.assign(starts.begin(), starts.end());
  // set-up waits: communication before every rank has started (the first collective waiting
  // for a slower rank's set-up), drawn as set-up, not as exposed communication
  setup_ = setup_waits(first_start, comm);
  if (!steps_.empty() && steps_.begin()->first < 0) warmup_steps_ = -steps_.begin()->first;
  imported_ = session_->meta(sessions::meta::kImported) == "1";  // no warm-up: ops outside the profiler steps
  // a hung run: the collective that timed out, as the end message names it
  if (session_->status() == "hang")
    if (const auto site = parse_hang_message(session_->meta(sessions::meta::kEndMessage))) {
      std::vector<const std::vector<sessions::OpRecord>*> lanes;
      std::vector<int32_t> ranks;
      for (const auto& r : rows_) {
        lanes.push_back(&r.ops);
        ranks.push_back(r.rank);
      }
      hung_ = hung_op(*site, lanes, ranks, session_->strings());
    }
  marks_ = ui::rebalance_marks(*session_);
  scale_ = TimeScale(begin, end, 800);  // the extent of what was recorded (not the setup before it)
  fit();  // the measured steps, when there are any (Shift+F: everything)
  history_ = ZoomHistory(view());
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  // a tooltip names the op that was under the cursor: after a zoom or pan (keys, history, a
  // search jump) another op is there, or none
  connect(this, &TimelineWidget::view_changed, this, &TimelineWidget::hide_tooltip);
  setMinimumHeight(kAxis + kRowHeight * static_cast<int>(std::max<size_t>(rows_.size(), 1)) + 4);
}

void TimelineWidget::resizeEvent(QResizeEvent*) {
  scale_.set_width(std::max(1, width() - kGutter));
  hide_tooltip();  // its op moved
}

void TimelineWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QColor text = palette().text().color();
  const int bottom = kAxis + static_cast<int>(rows_.size()) * kRowHeight;
  // selected range: shaded under everything, its length on the axis
  if (range_ && range_->t1 > scale_.t0() && range_->t0 < scale_.t1()) {
    const double x0 = std::max(0.0, scale_.x(range_->t0)), x1 = std::min(scale_.width(), scale_.x(range_->t1));
    QColor shade = palette().highlight().color();
    shade.setAlpha(50);
    p.fillRect(QRectF(kGutter + x0, 0, std::max(1.0, x1 - x0), bottom), shade);
  }
  // time axis: at most 8 ticks at round values, as few as keep each label clear of the next
  // (tester56 F5), their digits enough to tell them apart at any zoom (F10)
  p.setPen(text);
  const QFontMetrics fm = p.fontMetrics();
  const AxisTicks axis = axis_ticks(scale_.t0(), scale_.t1(), origin_ns_, scale_.width(),
                                    [&fm](const std::string& l) { return fm.horizontalAdvance(QString::fromStdString(l)); });
  const std::vector<QRectF> mark_boxes = rebalance_label_boxes(fm);
  for (const auto& [t, text_label] : axis.ticks) {
    const int x = kGutter + static_cast<int>(scale_.x(t));
    p.drawLine(x, kAxis - 6, x, kAxis);
    const QString label = QString::fromStdString(text_label);
    const int w = fm.horizontalAdvance(label);
    // whole or not at all, and not under a rebalance marker's label (drawn over the axis below)
    const QRectF at(x + 3, 0, w, kAxis - 8);
    const bool covered = std::any_of(mark_boxes.begin(), mark_boxes.end(), [&](const QRectF& b) { return b.intersects(at); });
    if (x + 3 + w <= width() && !covered) p.drawText(x + 3, kAxis - 8, label);
  }
  // step boundaries
  p.setPen(QPen(palette().mid().color(), 0, Qt::DashLine));  // cosmetic: the fast dashed path
  int last_x = -100;
  for (int64_t s : step_starts_) {
    if (s < scale_.t0() || s >= scale_.t1()) continue;
    const int x = kGutter + static_cast<int>(scale_.x(s));
    if (x - last_x < 6) continue;  // zoomed out over many steps: a line every few pixels at most
    last_x = x;
    p.drawLine(x, kAxis, x, bottom);
  }
  // rows
  for (size_t i = 0; i < rows_.size(); ++i) {
    const int y = row_y(i);
    p.setPen(text);
    // the row's short unique label (lane_labels), elided in the middle where too long: its start
    // (the rank) and its distinguishing end stay; hovering shows the lane's whole name
    p.drawText(QRect(4, y, kGutter - 8, kRowHeight), Qt::AlignVCenter | Qt::AlignLeft,
               p.fontMetrics().elidedText(rows_[i].label, Qt::ElideMiddle, kGutter - 8));
    const auto& compute = compute_[rows_[i].rank];
    for (const LaneBox& b : fold_lane(rows_[i].ops, rows_[i].index, scale_)) {
      const QRectF r(kGutter + b.x0, y + 3, std::max(1.0, b.x1 - b.x0), kRowHeight - 6);
      QColor c = rows_[i].sync ? gpu_sync_color() : rows_[i].annotation ? annotation_color() : category_color(b.category);
      if (b.count > 1) c = c.lighter(130);  // folded: a run of sub-pixel ops
      p.fillRect(r, c);
      if (b.category != sessions::OpCategory::comm || b.count > 1) continue;
      // hidden communication: the parts of this op that overlap the rank's compute
      const auto& o = rows_[i].ops[b.first];
      auto it = std::partition_point(compute.begin(), compute.end(),
                                     [&](const sessions::Interval& iv) { return iv.end <= o.start_ns; });
      for (; it != compute.end() && it->start < o.end_ns; ++it) {
        const double x0 = std::max(0.0, scale_.x(std::max(it->start, o.start_ns)));
        const double x1 = std::min(scale_.width(), scale_.x(std::min(it->end, o.end_ns)));
        if (x1 > x0) p.fillRect(QRectF(kGutter + x0, y + 3, std::max(1.0, x1 - x0), kRowHeight - 6), hidden_comm_color());
      }
      // set-up waits: the part of the op before every rank had started
      if (auto s = setup_.find(o.rank); s != setup_.end())
        for (const ViewRange& w : s->second) {
          if (w.t1 <= o.start_ns || w.t0 >= o.end_ns) continue;
          const double x0 = std::max(0.0, scale_.x(std::max(w.t0, o.start_ns)));
          const double x1 = std::min(scale_.width(), scale_.x(std::min(w.t1, o.end_ns)));
          if (x1 > x0) p.fillRect(QRectF(kGutter + x0, y + 3, std::max(1.0, x1 - x0), kRowHeight - 6), setup_wait_color());
        }
    }
  }
  // ops that did not end: a line at the start and an open arrow pointing on (no end to draw)
  p.setRenderHint(QPainter::Antialiasing, true);
  for (size_t i = 0; i < rows_.size(); ++i) {
    const int y = row_y(i);
    for (size_t k : rows_[i].did_not_end) {
      const auto& o = rows_[i].ops[k];
      if (o.start_ns < scale_.t0() || o.start_ns > scale_.t1()) continue;
      const double x = kGutter + scale_.x(o.start_ns);
      p.setPen(QPen(did_not_end_color(), 2));
      p.drawLine(QPointF(x, y + 1), QPointF(x, y + kRowHeight - 1));
      const QPointF arrow[3] = {{x + 1, y + 3.0}, {x + 10, y + kRowHeight / 2.0}, {x + 1, y + kRowHeight - 3.0}};
      p.setPen(QPen(did_not_end_color(), 1));
      p.setBrush(category_color(o.category));
      p.drawPolygon(arrow, 3);
      // "did not end" beside it where the row is free and the widget wide enough
      const QString label = QStringLiteral("did not end");
      const double w = p.fontMetrics().horizontalAdvance(label) + 4;
      const auto& ops = rows_[i].ops;
      const bool free = k + 1 >= ops.size() || scale_.x(ops[k + 1].start_ns) + kGutter > x + 14 + w;
      if (free && x + 14 + w <= width()) {
        p.setPen(did_not_end_color());
        p.drawText(QRectF(x + 13, y, w, kRowHeight), Qt::AlignVCenter | Qt::AlignLeft, label);
      }
    }
  }
  p.setBrush(Qt::NoBrush);
  p.setRenderHint(QPainter::Antialiasing, false);
  // the critical path: a bar under each op on it, dotted under a gap, a line where it changes row
  if (!path_.empty()) {
    const QColor c = critical_path_color();
    auto first = std::partition_point(path_.begin(), path_.end(),
                                      [&](const sessions::PathSegment& g) { return g.end_ns <= scale_.t0(); });
    if (first != path_.begin()) --first;  // the segment before the view: its row joins the first one
    size_t prev_row = rows_.size();
    for (auto it = first; it != path_.end() && it->start_ns < scale_.t1(); ++it) {
      // a gap has no lane: it is drawn on the rank's first row
      const size_t row = it->kind == sessions::PathSegment::Kind::gap ? row_of(it->rank, 0) : row_of(it->rank, it->lane);
      if (row >= rows_.size()) continue;
      const double x0 = std::max(-1.0, scale_.x(it->start_ns)), x1 = std::min(scale_.width() + 1, scale_.x(it->end_ns));
      const int y = row_y(row) + kRowHeight - 3;
      p.setPen(QPen(c, 3, it->kind == sessions::PathSegment::Kind::gap ? Qt::DotLine : Qt::SolidLine, Qt::FlatCap));
      if (x1 > x0) p.drawLine(QPointF(kGutter + x0, y), QPointF(kGutter + std::max(x0 + 1, x1), y));
      if (prev_row < rows_.size() && prev_row != row && x0 >= 0) {
        p.setPen(QPen(c, 1));
        p.drawLine(QPointF(kGutter + x0, row_y(prev_row) + kRowHeight - 3), QPointF(kGutter + x0, y));
      }
      prev_row = row;
    }
  }
  // a hung run: the collective that timed out, outlined, a line at its end and a label
  if (hung_) {
    const auto& o = op(*hung_);
    const QColor c = hang_marker_color();
    const double x0 = scale_.x(o.start_ns), x1 = scale_.x(o.end_ns);
    if (x1 >= 0 && x0 <= scale_.width()) {
      p.setPen(QPen(c, 2));
      p.setBrush(Qt::NoBrush);
      const double a = std::max(-2.0, x0), b = std::min(scale_.width() + 2, x1);
      p.drawRect(QRectF(kGutter + a, row_y(hung_->row) + 1, std::max(3.0, b - a), kRowHeight - 2));
    }
    if (x1 >= 0 && x1 <= scale_.width()) {
      p.setPen(QPen(c, 2, Qt::DashLine));
      p.drawLine(QPointF(kGutter + x1, kAxis), QPointF(kGutter + x1, bottom));
      const QString label = "timed out";
      const int w = p.fontMetrics().horizontalAdvance(label) + 6;
      const double lx = std::min(kGutter + x1 + 3, static_cast<double>(width() - w));
      const QRectF box(lx, row_y(hung_->row) - kRowHeight + 2, w, kRowHeight - 4);
      p.fillRect(box, palette().base());
      p.setPen(c);
      p.drawText(box, Qt::AlignCenter, label);
    }
  }
  // live rebalances: a line across the rows and a label on the axis
  {
    const QColor c = rebalance_marker_color();
    size_t k = 0;
    for (size_t i = 0; i < marks_.size(); ++i) {
      if (marks_[i].t_ns < scale_.t0() || marks_[i].t_ns > scale_.t1()) continue;
      const double x = mark_x(i);
      p.setPen(QPen(c, 2));
      p.drawLine(QPointF(x, kAxis), QPointF(x, bottom));
      const QRectF& box = mark_boxes[k++];
      p.fillRect(box, c);
      p.setPen(palette().base().color());
      p.drawText(box, Qt::AlignCenter, QStringLiteral("rebalance"));
    }
  }
  // the selected op, outlined (at least 3 px wide so that a thin op stays visible)
  if (selected_) {
    const auto& o = op(*selected_);
    if (o.end_ns > scale_.t0() && o.start_ns < scale_.t1()) {
      const double x0 = std::max(-2.0, scale_.x(o.start_ns)), x1 = std::min(scale_.width() + 2, scale_.x(o.end_ns));
      const double w = std::max(3.0, x1 - x0);
      p.setPen(QPen(text, 2));
      p.setBrush(Qt::NoBrush);
      p.drawRect(QRectF(kGutter + x0 - (w - (x1 - x0)) / 2, row_y(selected_->row) + 1, w, kRowHeight - 2));
    }
  }
  if (range_) {
    p.setPen(text);
    const QString label = QString::fromStdString(format_duration(range_->t1 - range_->t0));
    const double xm = scale_.x((range_->t0 + range_->t1) / 2);
    if (xm >= 0 && xm <= scale_.width()) {
      const QRectF box(kGutter + xm - 40, 0, 80, kAxis - 8);
      p.fillRect(box, palette().base());
      p.drawText(box, Qt::AlignCenter, label);
    }
  }
  p.setPen(palette().mid().color());
  p.drawLine(kGutter, kAxis, width(), kAxis);
}

void TimelineWidget::set_critical_path(std::vector<sessions::PathSegment> segments) {
  std::sort(segments.begin(), segments.end(),
            [](const sessions::PathSegment& a, const sessions::PathSegment& b) { return a.start_ns < b.start_ns; });
  path_ = std::move(segments);
  update();
}

size_t TimelineWidget::row_of(int32_t rank, int32_t lane) const {
  for (size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i].rank == rank && rows_[i].lane == lane) return i;
  return rows_.size();
}

std::optional<OpRef> TimelineWidget::op_at(QPoint pt) const {
  if (pt.x() < kGutter || pt.y() < kAxis) return std::nullopt;
  const size_t row = static_cast<size_t>((pt.y() - kAxis) / kRowHeight);
  if (row >= rows_.size()) return std::nullopt;
  const int64_t t = scale_.t(pt.x() - kGutter);
  const int64_t slack = static_cast<int64_t>(scale_.ns_per_px());
  const auto& ops = rows_[row].ops;
  auto it = std::partition_point(ops.begin(), ops.end(), [&](const sessions::OpRecord& o) { return o.end_ns + slack <= t; });
  if (it == ops.end() || it->start_ns - slack > t) return std::nullopt;
  return OpRef{row, static_cast<size_t>(it - ops.begin())};
}

void TimelineWidget::select(std::optional<OpRef> r, bool centre) {
  selected_ = r;
  if (r && centre) {  // centred, and at least kMatchMinPx wide (a sub-pixel op was folded out of sight)
    const auto& o = op(*r);
    navigate(match_view(view(), scale_.width(), o.start_ns, o.end_ns));
  }
  update();
  emit selection_changed();
}

bool TimelineWidget::has_sync_rows() const {
  return std::any_of(rows_.begin(), rows_.end(), [](const Row& r) { return r.sync; });
}

bool TimelineWidget::has_annotation_rows() const {
  return std::any_of(rows_.begin(), rows_.end(), [](const Row& r) { return r.annotation; });
}

QString TimelineWidget::row_tooltip(size_t row) const {
  const Row& r = rows_[row];
  QString full = QString("rank %1 %2").arg(r.rank).arg(r.lane_name);
  if (r.sync)
    full += " (host thread waiting for the GPU)";
  else if (r.annotation)
    full += " (NVTX ranges: they enclose the work of their thread)";
  else if (is_gpu_lane(r.lane_name.toStdString()))
    full += " (a CUDA stream, as CUPTI saw it)";
  if (!r.gpu_note.isEmpty()) full += "\n" + r.gpu_note;
  return full == r.label ? full : r.label + "\n" + full;
}

QString TimelineWidget::details(OpRef r) const {
  const auto& o = op(r);
  const auto& row = rows_[r.row];
  const std::string& whole = session_->name(o.name_id);
  const std::string short_name = short_kernel_name(whole);
  QString html = QString("<b>%1</b><br>rank %2, %3 lane, %4<br>%5<br>start %6<br>duration %7")
                     .arg(QString::fromStdString(short_name).toHtmlEscaped() +
                          (short_name == whole ? QString() : "</b><br><small>" + QString::fromStdString(whole).toHtmlEscaped() + "</small><b>"))
                     .arg(o.rank)
                     .arg(row.lane_name.toHtmlEscaped())
                     .arg(sessions::to_string(o.category))
                     .arg(QString::fromStdString(step_name(o.step, warmup_steps_, imported_)))
                     .arg(QString::fromStdString(format_duration(o.start_ns)))
                     .arg(QString::fromStdString(format_duration(o.end_ns - o.start_ns)));
  if (o.bytes) html += QString("<br>%1 (%2 bytes)").arg(QString::fromStdString(sessions::format_bytes(o.bytes))).arg(o.bytes);
  if (o.category != sessions::OpCategory::comm) return html;
  if (hung_ && *hung_ == r)
    html += QString("<br><b>timed out here</b>: %1")
                .arg(QString::fromStdString(session_->meta(sessions::meta::kEndMessage)).toHtmlEscaped());
  if (const int64_t wait = setup_wait_ns(r); wait > 0)
    html += QString("<br>set-up wait %1 (before every rank had started; not exposed communication)")
                .arg(QString::fromStdString(format_duration(wait)));
  if (!collectives_) collectives_ = session_->collectives();
  // the rank's collective records inside the span (the engine's split check, an all-gather,
  // runs in the same span before the collective itself)
  for (const auto& c : *collectives_) {
    if (c.rank != o.rank || c.start_ns < o.start_ns || c.end_ns > o.end_ns) continue;
    html += QString("<br><br><b>%1</b> %2<br>group %3, sequence %4, %5<br>sent %6, received %7<br>peers %8")
                .arg(QString::fromStdString(c.op))
                .arg(QString::fromStdString(c.name).toHtmlEscaped())
                .arg(QString::fromStdString(c.group).toHtmlEscaped())
                .arg(c.sequence)
                .arg(QString::fromStdString(c.dtype))
                .arg(QString::fromStdString(sessions::format_bytes(c.bytes_sent)))
                .arg(QString::fromStdString(sessions::format_bytes(c.bytes_received)))
                .arg(join(c.peers));
    if (!c.send_elements.empty())
      html += QString("<br>elements sent to each peer: %1<br>received from each: %2")
                  .arg(join(c.send_elements))
                  .arg(join(c.recv_elements));
  }
  return html;
}

void TimelineWidget::set_range(std::optional<ViewRange> r) {
  if (r && r->t1 < r->t0) std::swap(r->t0, r->t1);
  range_ = r;
  update();
  emit range_changed();
}

std::vector<OpTotal> TimelineWidget::totals(bool per_rank) const {
  if (!range_) return {};
  std::vector<sessions::OpRecord> in_range;
  for (const auto& row : rows_) {
    auto it = std::partition_point(row.ops.begin(), row.ops.end(),
                                   [&](const sessions::OpRecord& o) { return o.end_ns <= range_->t0; });
    for (; it != row.ops.end() && it->start_ns < range_->t1; ++it) in_range.push_back(*it);
  }
  return range_totals(in_range, range_->t0, range_->t1, per_rank);
}

void TimelineWidget::commit(Nav kind) {
  history_.visit(view(), kind != Nav::jump && kind == last_nav_);
  last_nav_ = kind;
  update();
  emit view_changed();
}

void TimelineWidget::navigate(ViewRange r) {
  scale_.show(r.t0, r.t1);
  commit(Nav::jump);
}

void TimelineWidget::back() {
  const ViewRange r = history_.back();
  scale_.show(r.t0, r.t1);
  last_nav_ = Nav::jump;
  update();
  emit view_changed();
}

void TimelineWidget::forward() {
  const ViewRange r = history_.forward();
  scale_.show(r.t0, r.t1);
  last_nav_ = Nav::jump;
  update();
  emit view_changed();
}

int64_t TimelineWidget::setup_wait_ns(OpRef r) const {
  const auto& o = op(r);
  auto s = setup_.find(o.rank);
  if (o.category != sessions::OpCategory::comm || s == setup_.end()) return 0;
  int64_t total = 0;
  for (const ViewRange& w : s->second) total += std::max<int64_t>(0, std::min(w.t1, o.end_ns) - std::max(w.t0, o.start_ns));
  return total;
}

void TimelineWidget::fit() {
  if (const auto m = measured_extent(steps_))
    scale_.show(m->t0, m->t1);
  else
    scale_.fit();
}

bool TimelineWidget::fit_step(int64_t step) {
  auto it = steps_.find(step);
  if (it == steps_.end()) return false;
  navigate(it->second);
  emit step_fitted(step);
  return true;
}

bool TimelineWidget::find(const QString& text, bool forward) {
  if (text.isEmpty()) {
    match_place_.reset();
    return false;
  }
  const auto& names = session_->strings();
  std::vector<bool> match(names.size());
  for (size_t i = 0; i < names.size(); ++i)
    match[i] = QString::fromStdString(names[i]).contains(text, Qt::CaseInsensitive);
  std::vector<const std::vector<sessions::OpRecord>*> lanes;
  for (const auto& r : rows_) lanes.push_back(&r.ops);
  // from the selection, else from the view's start (forward) or end (backward)
  auto hit = find_op(lanes, match, selected_, forward, forward ? scale_.t0() : scale_.t1());
  if (!hit)  // wrap around
    hit = find_op(lanes, match, std::nullopt, forward, forward ? std::numeric_limits<int64_t>::min() / 2
                                                               : std::numeric_limits<int64_t>::max() / 2);
  if (!hit) {
    match_place_.reset();
    return false;
  }
  if (match_text_ != text || !matches_) {  // counted once per search text
    matches_ = std::make_unique<MatchIndex>(lanes, std::move(match));
    match_text_ = text;
  }
  match_place_ = MatchPlace{matches_->position(*hit), matches_->total()};
  select(hit, true);
  return true;
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
  scale_.zoom_at(e->position().x() - kGutter, e->angleDelta().y() > 0 ? 1.25 : 0.8);
  commit(Nav::zoom);
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  press_x_ = last_x_ = static_cast<int>(e->position().x());
  const bool on_axis = e->position().y() < kAxis;
  if ((e->modifiers() & Qt::ShiftModifier) || on_axis) {
    drag_ = Drag::range;
    range_anchor_ = scale_.t(std::max(0, press_x_ - kGutter));
  } else {
    drag_ = Drag::pan;
  }
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
  const int x = static_cast<int>(e->position().x());
  if (drag_ == Drag::pan) {
    scale_.pan(last_x_ - x);
    last_x_ = x;
    update();
    emit view_changed();
    return;
  }
  if (drag_ == Drag::range) {
    const int64_t t = scale_.t(std::max(0, x - kGutter));
    range_ = ViewRange{std::min(range_anchor_, t), std::max(range_anchor_, t)};
    update();
    return;
  }
  if (e->position().x() < kGutter && e->position().y() >= kAxis) {  // the row's whole name
    const auto row = static_cast<size_t>((e->position().y() - kAxis) / kRowHeight);
    if (row < rows_.size()) {
      show_tooltip(e->globalPosition().toPoint(), row_tooltip(row));
      return;
    }
  }
  const auto mark = mark_at(e->position().toPoint());
  if (mark && e->position().y() < kAxis) {  // the label on the axis
    show_tooltip(e->globalPosition().toPoint(), QString::fromStdString(marks_[*mark].text));
    return;
  }
  auto r = did_not_end_at(e->position().toPoint());
  if (!r) r = op_at(e->position().toPoint());
  if (r) {
    show_tooltip(e->globalPosition().toPoint(), op_tooltip(*r));
  } else if (mark) {
    show_tooltip(e->globalPosition().toPoint(), QString::fromStdString(marks_[*mark].text));
  } else {
    hide_tooltip();
  }
}

void TimelineWidget::show_tooltip(QPoint global, const QString& text) {
  QToolTip::showText(global, text, this);
  tooltip_shown_ = true;
}

void TimelineWidget::hide_tooltip() {
  if (!std::exchange(tooltip_shown_, false)) return;  // another widget's tooltip is not ours to hide
  QToolTip::hideText();
}

QString TimelineWidget::op_tooltip(OpRef r) const {
  const auto& o = op(r);
  const std::string& name = session_->name(o.name_id);
  const bool unfinished = sessions::did_not_end(o.start_ns, o.end_ns, name);
  QString tip = QString("%1\nrank %2, %3 lane, %4\nstart %5, %6")
                    .arg(QString::fromStdString(short_kernel_name(std::string(unfinished ? sessions::without_did_not_end(name) : name))))
                    .arg(o.rank)
                    .arg(rows_[r.row].lane_name)
                    .arg(sessions::to_string(o.category))
                    .arg(QString::fromStdString(format_duration(o.start_ns)))
                    .arg(unfinished ? QString("did not end (the profiler never saw it end: no duration, counted as no time)")
                                    : "duration " + QString::fromStdString(format_duration(o.end_ns - o.start_ns)));
  tip += "\n" + QString::fromStdString(step_name(o.step, warmup_steps_, imported_));
  if (const std::string s = short_kernel_name(name); s != name) tip += "\nfull name: " + QString::fromStdString(name);
  if (o.bytes) tip += QString("\n%1 bytes, sequence %2").arg(o.bytes).arg(o.correlation);
  if (const int64_t wait = setup_wait_ns(r); wait > 0)
    tip += QString("\nset-up wait %1 (not exposed communication)").arg(QString::fromStdString(format_duration(wait)));
  return tip;
}

std::optional<OpRef> TimelineWidget::did_not_end_at(QPoint pt) const {
  if (pt.x() < kGutter || pt.y() < kAxis) return std::nullopt;
  const size_t row = static_cast<size_t>((pt.y() - kAxis) / kRowHeight);
  if (row >= rows_.size()) return std::nullopt;
  for (size_t k : rows_[row].did_not_end) {
    const double x = kGutter + scale_.x(rows_[row].ops[k].start_ns);
    if (pt.x() >= x - 4 && pt.x() <= x + 10) return OpRef{row, k};  // the line and its arrow
  }
  return std::nullopt;
}

double TimelineWidget::mark_x(size_t i) const { return kGutter + scale_.x(marks_.at(i).t_ns); }

std::vector<QRectF> TimelineWidget::rebalance_label_boxes(const QFontMetrics& fm) const {
  std::vector<QRectF> out;
  const int w = fm.horizontalAdvance(QStringLiteral("rebalance")) + 6;
  for (size_t i = 0; i < marks_.size(); ++i) {
    if (marks_[i].t_ns < scale_.t0() || marks_[i].t_ns > scale_.t1()) continue;
    out.emplace_back(std::min(mark_x(i) + 2, static_cast<double>(width() - w)), 1, w, kAxis - 10);
  }
  return out;
}

std::optional<size_t> TimelineWidget::mark_at(QPoint p) const {
  for (size_t i = 0; i < marks_.size(); ++i) {
    if (marks_[i].t_ns < scale_.t0() || marks_[i].t_ns > scale_.t1()) continue;
    const double x = mark_x(i);
    // the line, or the label to its right on the axis
    if (std::abs(p.x() - x) <= 3 || (p.y() < kAxis && p.x() >= x && p.x() <= x + 70)) return i;
  }
  return std::nullopt;
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* e) {
  const Drag was = std::exchange(drag_, Drag::none);
  const bool moved = std::abs(static_cast<int>(e->position().x()) - press_x_) > 2;
  if (was == Drag::range) {
    const int64_t t = scale_.t(std::max(0, static_cast<int>(e->position().x()) - kGutter));
    // a click on the axis clears the range
    set_range(moved ? std::optional<ViewRange>({std::min(range_anchor_, t), std::max(range_anchor_, t)}) : std::nullopt);
  } else if (was == Drag::pan) {
    if (moved)
      commit(Nav::pan);
    else
      select(op_at(e->position().toPoint()));  // a click: select (or clear on empty space)
  }
}

void TimelineWidget::mouseDoubleClickEvent(QMouseEvent* e) {
  if (e->position().x() < kGutter) return;
  const int64_t t = scale_.t(e->position().x() - kGutter);
  for (const auto& [step, w] : steps_)
    if (t >= w.t0 && t < w.t1) {
      fit_step(step);
      return;
    }
}

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
  const double mid = scale_.width() / 2;
  const bool alt = e->modifiers() & Qt::AltModifier, shift = e->modifiers() & Qt::ShiftModifier;
  if (e->key() == Qt::Key_Backspace || (alt && (e->key() == Qt::Key_Left || e->key() == Qt::Key_Right))) {
    (e->key() == Qt::Key_Right || (e->key() == Qt::Key_Backspace && shift)) ? forward() : back();
    return;
  }
  if (e->key() >= Qt::Key_0 && e->key() <= Qt::Key_9 && !(e->modifiers() & Qt::ControlModifier)) {
    fit_step(e->key() - Qt::Key_0);  // key n: step n, as `stats` and the step box number them (tester56 F2)
    return;
  }
  switch (e->key()) {
    case Qt::Key_W: scale_.zoom_at(mid, 1.25); commit(Nav::zoom); return;
    case Qt::Key_S: scale_.zoom_at(mid, 0.8); commit(Nav::zoom); return;
    case Qt::Key_A: scale_.pan(-scale_.width() / 10); commit(Nav::pan); return;
    case Qt::Key_D: scale_.pan(scale_.width() / 10); commit(Nav::pan); return;
    case Qt::Key_F:  // the measured steps; Shift+F everything (warm-up and set-up too)
      shift ? scale_.fit() : fit();
      commit(Nav::jump);
      return;
    case Qt::Key_Escape:
      select(std::nullopt);
      set_range(std::nullopt);
      return;
    default: QWidget::keyPressEvent(e); return;
  }
}

}  // namespace embedscope::ui
