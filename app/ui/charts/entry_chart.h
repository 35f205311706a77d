#pragma once
// The frame shared by the memory view's timelines over trace entries (ActiveTimeline,
// SegmentTimelineChart): x is the allocator trace's entry in pixel columns, y the bytes, the
// bands rendered once per size into an image, the byte and entry axes, the title line and the
// dashed cursor at the entry the block map shows. A subclass says how many columns it has, the
// bytes at the top of its y axis, and renders its bands.

#include <QImage>
#include <QString>
#include <QWidget>

#include <cstdint>
#include <memory>
#include <vector>

#include "embedscope/sessions/analysis/memory_analysis.h"

namespace embedscope::ui {

class EntryChart : public QWidget {
 public:
  /// Marks `entry` (an index into the history's entries; -1: none) with a dashed line.
  void set_cursor(int64_t entry);
  /// Where the bands are drawn (widget coordinates): the widget less the axes' margins.
  QRectF plot_rect() const;
  /// Where the title is drawn: above the plot, from its left edge to the widget's right margin,
  /// as many lines tall as the title wraps into at that width (at least one line, 20 px): a
  /// title wider than the chart is wrapped, not cut ("...; click: th", tester46 F15).
  QRectF title_rect() const;
  /// A tick of the byte (y) axis as painted: its bytes, the label's rect (widget px) and the
  /// label.
  struct YTick {
    int64_t bytes;
    QRectF label;
    QString text;
  };
  /// The byte axis's ticks: a power of two bytes apart (byte_tick_step), at most about
  /// `byte_ticks_` intervals, and at least a label's height + 2 px apart, doubling the step until
  /// they are - so their labels never overlap at any height (tester59 F8: 0..20 MiB in 4 MiB steps
  /// on a 60 px axis overlapped). Empty without a history.
  std::vector<YTick> y_ticks() const;
  /// The pixel column's index (0 .. column_count() - 1) under widget x, or -1 outside the plot.
  int column_at(double x) const;

 protected:
  EntryChart(QWidget* parent, int minimum_height);
  virtual int column_count() const = 0;
  /// The bytes at the top of the y axis (> 0 once there are columns).
  virtual int64_t y_top() const = 0;
  /// The bytes at the bottom of the y axis (< y_top()); 0 unless a subclass starts above the
  /// blocks live for the whole trace (ActiveTimeline::set_baseline_enabled).
  virtual int64_t y_bottom() const { return 0; }
  /// Draws the bands into `bands` (plot_rect()'s size, transparent), only when there is a
  /// history and column_count() > 0.
  virtual void render_bands(QImage& bands) const = 0;
  /// The title line above the plot.
  virtual QString title() const = 0;
  /// Renders the bands again (after new data or a resize) and schedules a repaint.
  void refresh();
  /// "1.5 MiB"; "12.345 ms" (three decimals, as the tooltips show times).
  static QString bytes(int64_t b);
  static QString ms(int64_t ns);
  /// "entry E (T ms)" of entry `e` of the history (e >= 0).
  QString entry_time(int64_t e) const;

  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;

  std::shared_ptr<const sessions::MemoryHistory> history_;
  int byte_ticks_ = 5;  ///< about how many byte ticks the y axis gets

 private:
  int64_t cursor_ = -1;
  QImage bands_;
};

}  // namespace embedscope::ui
