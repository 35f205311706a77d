#include "charts/segment_timeline_chart.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>

#include "charts/block_map.h"
#include "embedscope/sessions/analysis/memory_analysis.h"

namespace embedscope::ui {

int64_t segment_baseline(const sessions::SegmentTimeline& timeline, int64_t live_bytes) {
  if (live_bytes <= 0) return 0;
  const auto& cols = timeline.columns;
  size_t first = 0;
  while (first < cols.size() && (cols[first].bands.empty() || cols[first].bands.front().active < live_bytes)) ++first;
  if (first == cols.size()) return 0;
  const int32_t bottom = cols[first].bands.front().segment;
  int64_t least = live_bytes;
  for (size_t c = first; c < cols.size(); ++c) {
    if (cols[c].bands.empty() || cols[c].bands.front().segment != bottom || cols[c].bands.front().offset != 0) return 0;
    least = std::min(least, cols[c].bands.front().active);
  }
  return least;
}

StaticSegmentCut hide_static_segments(const sessions::SegmentTimeline& timeline, int64_t min_bytes) {
  StaticSegmentCut out;
  out.shown = timeline;
  const auto& cols = timeline.columns;
  out.cuts.assign(cols.size(), {});
  const size_t n = timeline.segments.size();
  if (cols.empty() || n == 0 || min_bytes <= 0) return out;
  // per segment: its first and last column, whether it skipped one, its active bytes after its first
  std::vector<int64_t> first(n, -1), last(n, -1), active(n, -1);
  std::vector<bool> ok(n, true);
  for (size_t c = 0; c < cols.size(); ++c)
    for (const auto& b : cols[c].bands) {
      if (b.segment < 0 || static_cast<size_t>(b.segment) >= n) continue;
      const auto s = static_cast<size_t>(b.segment);
      if (first[s] < 0) {
        first[s] = static_cast<int64_t>(c);
      } else {
        if (last[s] != static_cast<int64_t>(c) - 1) ok[s] = false;  // a gap
        if (active[s] >= 0 && active[s] != b.active) ok[s] = false;
        active[s] = b.active;
      }
      last[s] = static_cast<int64_t>(c);
    }
  const auto tenth = std::max<int64_t>(1, static_cast<int64_t>(cols.size() / 10));
  std::vector<bool> hide(n, false);
  for (size_t s = 0; s < n; ++s) {
    const auto& seg = timeline.segments[s];
    hide[s] = ok[s] && first[s] >= 0 && first[s] <= tenth && last[s] == static_cast<int64_t>(cols.size()) - 1 &&
              seg.end_entry < 0 && !seg.resized && seg.size >= min_bytes;
    if (!hide[s]) continue;
    out.hidden.push_back(static_cast<int32_t>(s));
    out.bytes += seg.size;
    out.active += std::max<int64_t>(0, active[s]);
  }
  if (out.hidden.empty()) return out;
  bool anything_left = false;
  out.shown.peak_reserved = 0;
  for (size_t c = 0; c < cols.size(); ++c) {
    auto& col = out.shown.columns[c];
    col.bands.clear();
    col.reserved = col.active = 0;
    int64_t offset = 0;
    for (const auto& b : cols[c].bands) {
      if (b.segment >= 0 && static_cast<size_t>(b.segment) < n && hide[static_cast<size_t>(b.segment)]) {
        if (out.cuts[c].empty() || out.cuts[c].back() != offset) out.cuts[c].push_back(offset);
        continue;
      }
      col.bands.push_back({b.segment, offset, b.size, b.active});
      offset += b.size;
      col.reserved += b.size;
      col.active += b.active;
    }
    anything_left = anything_left || (!col.bands.empty() && !out.cuts[c].empty());
    out.shown.peak_reserved = std::max(out.shown.peak_reserved, col.reserved);
  }
  if (!anything_left) return StaticSegmentCut{{}, 0, 0, timeline, std::vector<std::vector<int64_t>>(cols.size())};
  out.shown.peak_reserved = std::max<int64_t>(1, out.shown.peak_reserved);
  return out;
}

SegmentTimelineChart::SegmentTimelineChart(QWidget* parent) : EntryChart(parent, 160) { byte_ticks_ = 4; }

QColor SegmentTimelineChart::color_of(int32_t s) const {
  return s >= 0 && static_cast<size_t>(s) < colors_.size() ? colors_[static_cast<size_t>(s)] : no_stack_color();
}

QColor SegmentTimelineChart::reserved_color(int32_t s) const {
  const QColor c = color_of(s);
  return QColor((c.red() + 3 * 255) / 4, (c.green() + 3 * 255) / 4, (c.blue() + 3 * 255) / 4);
}

void SegmentTimelineChart::set_data(std::shared_ptr<const sessions::MemoryHistory> history,
                                    sessions::SegmentTimeline timeline, std::vector<sessions::MemoryFrame> frames,
                                    std::vector<sessions::MemoryStackFrame> stacks, int64_t live_bytes) {
  history_ = std::move(history);
  timeline_ = std::move(timeline);
  frames_ = std::move(frames);
  stacks_ = std::move(stacks);
  colors_.clear();
  for (const auto& seg : timeline_.segments) {
    const auto f = sessions::stack_frames(seg.stack_id, frames_, stacks_);
    // the tag of the allocations it made: the innermost function ("forward (train.py:20)" -> "forward")
    colors_.push_back(f.empty() ? no_stack_color() : BlockMap::color_of_tag(f[0].substr(0, f[0].find(" ("))));
  }
  baseline_ = segment_baseline(timeline_, live_bytes);
  cut_ = hide_static_segments(timeline_, timeline_.peak_reserved / 4);
  refresh();
}

void SegmentTimelineChart::set_baseline_enabled(bool on) {
  baseline_on_ = on;
  refresh();
}

int32_t SegmentTimelineChart::segment_at(double x, double y) const {
  const int c = column_at(x);
  const QRectF r = plot_rect();
  if (c < 0 || y < r.top() || y > r.bottom()) return -1;
  const auto b = y_bottom() + static_cast<int64_t>((r.bottom() - y) / r.height() * static_cast<double>(y_top() - y_bottom()));
  const auto& col = shown().columns[static_cast<size_t>(c)];
  const int32_t band = sessions::segment_band_at(col, b);
  return band < 0 ? -1 : col.bands[static_cast<size_t>(band)].segment;
}

QString SegmentTimelineChart::describe(int32_t s, int column) const {
  if (!history_ || s < 0 || static_cast<size_t>(s) >= timeline_.segments.size()) return {};
  const sessions::SegmentLife& seg = timeline_.segments[static_cast<size_t>(s)];
  const auto& entries = history_->entries();
  auto when = [&](int64_t e) { return entry_time(e); };
  QString text = QString("segment at 0x%1: %2%3, %4 pool (by its size), stream %5")
                     .arg(static_cast<qulonglong>(seg.address), 0, 16)
                     .arg(bytes(seg.size))
                     .arg(seg.resized ? QString(" at most (made with %1, grown and shrunk: expandable)").arg(bytes(seg.first_size))
                                      : QString())
                     .arg(seg.small_pool ? "small" : "large")
                     .arg(seg.stream < 0 ? QString("unknown") : QString::number(seg.stream));
  QString life = seg.start_entry >= 0 ? QString("made at %1").arg(when(seg.start_entry)) : QString("made before the trace");
  if (seg.end_entry >= 0) {
    life += QString(", released at %1").arg(when(seg.end_entry));
    if (seg.start_entry >= 0)
      life += QString(": %1 entries, %2")
                  .arg(seg.end_entry - seg.start_entry)
                  .arg(ms(entries[static_cast<size_t>(seg.end_entry)].time_ns - entries[static_cast<size_t>(seg.start_entry)].time_ns));
  } else {
    life += ", still reserved at the end of the trace";
  }
  text += "\n" + life;
  if (column >= 0 && static_cast<size_t>(column) < timeline_.columns.size()) {
    const auto& col = timeline_.columns[static_cast<size_t>(column)];
    for (const auto& b : col.bands)
      if (b.segment == s)
        text += QString("\nafter entry %1: %2 of %3 active (%4%)")
                    .arg(col.entry)
                    .arg(bytes(b.active), bytes(b.size))
                    .arg(b.size > 0 ? 100.0 * static_cast<double>(b.active) / static_cast<double>(b.size) : 0.0, 0, 'f', 1);
  }
  const auto frames = sessions::stack_frames(seg.stack_id, frames_, stacks_);
  if (frames.empty()) text += seg.start_entry >= 0 ? "\n(no stack recorded)" : "";
  else text += "\nallocated by:";
  for (size_t i = 0; i < frames.size() && i < 12; ++i) text += "\n  " + QString::fromStdString(frames[i]);
  return text;
}

QString SegmentTimelineChart::title() const {
  // the baseline said first: a narrow chart cuts the end of its title
  if (baseline_on_ && !cut_.hidden.empty())
    return QString("segment timeline less %1 static segment%2 (%3, %4 active all along; dashed: where cut out): "
                   "reserved segments, oldest at the bottom; full colour: active, light: cached; click: the segment on the map")
        .arg(cut_.hidden.size())
        .arg(cut_.hidden.size() == 1 ? "" : "s")
        .arg(bytes(cut_.bytes), bytes(cut_.active));
  const QString above = y_bottom() > 0 ? QString(" above %1 of the oldest segment active for the whole trace").arg(bytes(y_bottom())) : QString();
  return "segment timeline" + above + ": reserved segments, oldest at the bottom; full colour: active, light: cached; "
         "click: the segment on the map";
}

void SegmentTimelineChart::render_bands(QImage& bands) const {
  const auto& cols = shown().columns;
  const bool cut = baseline_on_ && !cut_.hidden.empty();
  QPainter p(&bands);
  const double cw = static_cast<double>(bands.width()) / static_cast<double>(cols.size());
  const int64_t bottom = y_bottom();  // the value at the image's foot
  const double h = bands.height(), scale = h / static_cast<double>(y_top() - bottom);
  const QColor separator = palette().color(QPalette::Base);
  for (size_t c = 0; c < cols.size(); ++c) {
    const double x0 = std::floor(static_cast<double>(c) * cw), x1 = std::floor(static_cast<double>(c + 1) * cw);
    const double w = std::max(1.0, x1 - x0);
    // each band from its top down to the top of the last one drawn (no seams); its active share
    // at its foot; a band under a quarter pixel is covered by the next one
    double below = h;
    for (const auto& b : cols[c].bands) {
      if (b.offset + b.size <= bottom) continue;  // wholly under the baseline
      const double y0 = h - static_cast<double>(b.offset + b.size - bottom) * scale;
      if (below - y0 < 0.25) continue;
      p.fillRect(QRectF(x0, y0, w, below - y0), reserved_color(b.segment));
      // its active share from its foot, less what lies under the baseline
      const int64_t active = b.active - std::max<int64_t>(0, bottom - b.offset);
      const double ya = std::max(y0, below - static_cast<double>(active) * scale);
      if (active > 0) p.fillRect(QRectF(x0, ya, w, below - ya), color_of(b.segment));
      if (below - y0 >= 4) p.fillRect(QRectF(x0, y0, w, 1), separator);  // where one band ends
      below = y0;
    }
    if (cut)  // where static segments were cut out: a dashed dark line (4 px on, 3 off)
      for (const int64_t at : cut_.cuts[c]) {
        const double y = std::clamp(h - static_cast<double>(at - bottom) * scale, 0.0, h - 2);
        for (double x = x0; x < x0 + w; ++x)
          if (static_cast<int64_t>(x) % 7 < 4) p.fillRect(QRectF(x, y - 1, 1, 2), cut_line_color());
      }
  }
}

void SegmentTimelineChart::mouseMoveEvent(QMouseEvent* e) {
  const int32_t s = segment_at(e->position().x(), e->position().y());
  if (s < 0) {
    QToolTip::hideText();
    return;
  }
  QToolTip::showText(e->globalPosition().toPoint(), describe(s, column_at(e->position().x())), this);
}

void SegmentTimelineChart::mousePressEvent(QMouseEvent* e) {
  const int c = column_at(e->position().x());
  if (c < 0) return;
  const int64_t entry = shown().columns[static_cast<size_t>(c)].entry;
  const int32_t s = segment_at(e->position().x(), e->position().y());
  if (s >= 0) emit segment_clicked(entry, static_cast<int64_t>(timeline_.segments[static_cast<size_t>(s)].address));
  else emit entry_clicked(entry);
}

}  // namespace embedscope::ui
