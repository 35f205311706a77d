#pragma once
// One colour per op category, the same in every view, and one per compared session.

#include <QColor>

#include <cstddef>

#include "embedscope/sessions/model/events.h"

class QCustomPlot;

namespace embedscope::ui {

inline QColor category_color(sessions::OpCategory c) {
  switch (c) {
    case sessions::OpCategory::input: return QColor(0x8e, 0x8e, 0x8e);      // grey
    case sessions::OpCategory::lookup: return QColor(0x2c, 0xa0, 0x2c);     // green
    case sessions::OpCategory::comm: return QColor(0xd6, 0x27, 0x28);       // red
    case sessions::OpCategory::dense: return QColor(0x1f, 0x77, 0xb4);      // blue
    case sessions::OpCategory::optimizer: return QColor(0xff, 0x7f, 0x0e);  // orange
    case sessions::OpCategory::memcpy: return QColor(0x94, 0x67, 0xbd);     // purple
    case sessions::OpCategory::other: return QColor(0x7f, 0x7f, 0x00);      // olive
  }
  return Qt::gray;
}

/// Communication that ran while the same rank computed ("hidden", HTA's overlap) is drawn in
/// this lighter colour; exposed communication keeps category_color(comm).
inline QColor hidden_comm_color() { return QColor(0xf4, 0xb4, 0xb4); }

/// Communication before every rank had started (ui::setup_waits: the first collective waiting
/// for a slower rank's set-up) is drawn in this tan, not as exposed communication.
inline QColor setup_wait_color() { return QColor(0xc8, 0xb0, 0x7a); }

/// The host's waits for the GPU (the `gpu_sync` lane: cudaStreamSynchronize,
/// cudaDeviceSynchronize; stored as category `other`) are drawn in this slate blue-grey, not in
/// other's olive, and have their own legend entry (tester38 #13).
inline QColor gpu_sync_color() { return QColor(0x5b, 0x6b, 0x8c); }

/// Annotation ranges (lanes of kind `annotation`: an Nsight export's NVTX ranges, a row under
/// their thread as in Nsight Systems; stored as category `other`) are drawn in this light teal,
/// not in other's olive, with their own legend entry (tester42 F24).
inline QColor annotation_color() { return QColor(0x76, 0xb7, 0xb2); }

/// The marker at the collective a hung run timed out in: a cyan no category uses, so that it
/// stands out on the red of exposed communication (on light and dark palettes).
inline QColor hang_marker_color() { return QColor(0x00, 0xb4, 0xe6); }

/// A live rebalance on the timeline (core/rebalance_marks.h): a dark green no category uses.
inline QColor rebalance_marker_color() { return QColor(0x1a, 0x8a, 0x3a); }

/// The critical path (sessions/critical_path.h) drawn under the ops that bound each step.
inline QColor critical_path_color() { return QColor(0xc0, 0x00, 0xc0); }

/// Paints a QCustomPlot in the widget's palette (light or dark, as the system's): background
/// from Base, axes, tick labels, titles and legend text from Text, grid from Mid. Call it after
/// (re)building the plot's layout; it also restyles and replots when the palette changes.
void follow_palette(QCustomPlot* plot);

/// The colour map of every heatmap: dark indigo (0) through purple and orange to a saturated
/// red at the maximum (1), so that the hottest cell is clearly hot on light and dark palettes
/// (QCustomPlot's gpThermal ends in white, which reads as an empty cell). Stops (0..1):
/// 0 #1b0c5a, 0.35 #7b1fa2, 0.7 #f57c00, 1 #d50000.
QColor heat_color(double t);

/// The number of distinct colours session_color has before it repeats (tester42 F26: 11 compared
/// sessions shared 8, so A and I were both blue).
inline constexpr size_t kSessionColors = 12;

/// The colour of session i in every comparison chart: kSessionColors distinct colours (tab10's
/// ten, then indigo #393b79 and light blue #a6cee3; any two at least 60 apart in RGB), repeating from session kSessionColors on; a chart
/// tells a repeat apart by session_marker and session_dash.
QColor session_color(size_t i);

/// The marker shape of session i (QCPScatterStyle::ScatterShape as an int, so this header needs
/// no QCustomPlot): one of 12 shapes, shifted by one every kSessionColors sessions so that
/// (session_color, session_marker) differs for the first 144 sessions.
int session_marker(size_t i);

/// The line style of session i in charts whose dash does not already say what a line is:
/// solid for the first kSessionColors sessions, then dashed, dotted, dash-dot.
Qt::PenStyle session_dash(size_t i);


}  // namespace embedscope::ui
