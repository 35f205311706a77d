#pragma once
// QCustomPlot helpers shared by the charts: axes that count things (steps, ranks, rows) and
// the heatmaps' colour map.

#include <QSharedPointer>

#include <qcustomplot.h>

namespace embedscope::ui {

/// A ticker for an axis of whole numbers (steps, ranks, rows): ticks only at integers, at a
/// step of 1, 2, 5, 10, 20, ... chosen for about `tick_count` ticks, labels without decimals,
/// no sub-ticks. An axis from -0.6 to 3.4 (bars centred on ranks 0..3) gets ticks 0, 1, 2, 3,
/// never "-0.5" or "0.5".
QSharedPointer<QCPAxisTicker> integer_ticker(int tick_count = 8);

/// The heatmaps' colour map (heat_color in colors.h): its top is a saturated red, never white.
QCPColorGradient heat_gradient();

}  // namespace embedscope::ui
