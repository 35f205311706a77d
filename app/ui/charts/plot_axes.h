#pragma once
// QCustomPlot helpers shared by the charts: axes that count things (steps, ranks, rows) and
// the heatmaps' colour map.

#include <QRectF>
#include <QSharedPointer>
#include <QStringList>

#include <vector>

#include <qcustomplot.h>

namespace embedscope::ui {

/// A ticker for an axis of whole numbers (steps, ranks, rows): ticks only at integers, at a
/// step of 1, 2, 5, 10, 20, ... chosen for about `tick_count` ticks, labels without decimals,
/// no sub-ticks. An axis from -0.6 to 3.4 (bars centred on ranks 0..3) gets ticks 0, 1, 2, 3,
/// never "-0.5" or "0.5".
QSharedPointer<QCPAxisTicker> integer_ticker(int tick_count = 8);

/// The heatmaps' colour map (heat_color in colors.h): its top is a saturated red, never white.
QCPColorGradient heat_gradient();

/// The texts `axis` may be titled with, the fullest first (lines split by '\n'):
/// keep_axes_readable titles it with the first whose every line fits along its axis rect, else the
/// last. Sets the first as the label now. {"fragmentation %", "frag. %", "%"}.
void set_label_choices(QCPAxis* axis, const QStringList& choices);

/// Keeps the vertical axes (left, right) of `plot`'s main axis rect readable at whatever size
/// the plot gets (tester59 F8: at an 80 px axis, "0 5 10 15 20" overlapped and "fragmentation %"
/// read "gmentation %"): after each layout, each visible one gets the most ticks (at most
/// `max_ticks`, by QCPAxisTicker::setTickCount) whose labels are at least a label's height + 2 px
/// apart (tick_label_rects do not intersect), and the first of its label choices
/// (set_label_choices) that fits its axis rect. Replots (queued) when it changed either. The
/// axes' tickers must honour setTickCount (QCustomPlot's default one does).
void keep_axes_readable(QCustomPlot* plot, int max_ticks = 5);

/// Where `axis`'s tick labels are drawn, plot pixels, from its current tick vector: each label's
/// text rect (QFontMetrics of its tick label font) centred on its tick, beside the axis (left of a
/// left axis, right of a right one, under a bottom one). Ticks outside the range are left out.
std::vector<QRectF> tick_label_rects(QCPAxis* axis);

/// True when every line of `axis`'s title fits along its axis rect (the rect's height for a left
/// or right axis, its width for a top or bottom one), in the axis's label font.
bool axis_label_fits(QCPAxis* axis);

}  // namespace embedscope::ui
