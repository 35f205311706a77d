#pragma once
// The report (embedscope-ui --report) renders each view as one image; panes that scroll in the
// window (the critical path, the sharding plan, the timeline of many ranks) would be cut at
// their viewport. show_every_row makes the window tall enough that none of them scrolls, but a
// pane of more than kReportMaxRows rows (the ranks of a 1,024-rank session) shows its first
// kReportMaxRows, and the image says which rows it shows (cut_panes, with_cut_note): the
// 1,024-rank report drew 1600 x 30000 px images, cut at 30000 px without a word, before.

#include <QImage>
#include <QString>

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "core/timeline_math.h"  // ViewRange
#include "core/timeline_nav.h"   // report_step
#include "embedscope/sessions/analysis/analysis.h"  // RunStats

class QWidget;

namespace embedscope::ui {

/// The most rows a table of a report image shows (every rank of a 64-rank session); the
/// timeline, whose rows are lanes, shows twice as many (64 ranks of 2 lanes). A longer pane shows
/// its first rows.
inline constexpr int kReportMaxRows = 64;
/// The most rows of the Summary's sharding plan on a report image (a rank's row and one per shard:
/// 32 ranks of 26 tables and more); a pane allows itself more than kReportMaxRows with the
/// property "report_max_rows".
inline constexpr int kReportMaxPlanRows = 1024;
/// The tallest report image, px, whatever the panes: a bound of last resort.
inline constexpr int kReportMaxHeight = 30000;

/// The widest report image, px: a table that shows all it holds (QAbstractScrollArea::
/// AdjustToContents: compare's figures, the trade-offs' runs) widens the image up to this.
inline constexpr int kReportMaxWidth = 4800;

// report_step, the step the report's second timeline image fits: core/timeline_nav.h

/// Lets every visible QLabel under `view` that does not wrap and is wider than `max_width` - 64
/// px wrap its words (a label listing 1,024 ranks held a report page 31,674 px wide: tester42
/// F19). Returns how many it changed.
int wrap_wide_labels(QWidget* view, int max_width = kReportMaxWidth);

/// `image` at most `max_width` px wide: a wider one is cut on the right and says so on a strip
/// above it ("This page is cut at 4,800 px of its 31,674"); `image` itself when it fits. The bound
/// of last resort behind wrap_wide_labels and the views' own bins.
QImage capped_width(const QImage& image, int max_width = kReportMaxWidth);

/// The px of columns that the widest visible table under `view` whose size adjust policy is
/// AdjustToContents, or whose property "report_every_column" is true (the Summary's Critical path
/// and Collectives, which share their row by the width their columns need: tester50 F3), means
/// to show every column and cannot show in its viewport: 0 when none is cut. Other tables scroll
/// as in the window and are not counted.
int columns_cut(QWidget* view);

/// First widens `window` (up to `max_width` px) until columns_cut(view) is 0. Then grows `window` (keeping its width) until no visible scroll area inside `view` (item views,
/// the timeline's scroll area) has anything left to scroll vertically, or the window is
/// `max_height` px tall. A scroll area of more than `max_rows` rows (an item view's drawn rows: a
/// table's model rows, a tree's expanded rows with their children;
/// the timeline's rows: 2 x max_rows) is first held to the height of its first rows and left out
/// of the growing (cut_panes names it; release_held_panes lets it go before the next view). Item views are switched to per-pixel scrolling so that
/// their scroll bar counts pixels. Returns the remaining vertical overflow in px summed over the
/// scroll areas not held (0: every row but those of held panes is on the image). Cost: a few
/// layout passes.
int show_every_row(QWidget* window, QWidget* view, int max_height = kReportMaxHeight, int max_rows = kReportMaxRows,
                   int max_width = kReportMaxWidth);

/// Lets the panes show_every_row held under `view` take any height again (else their minimum
/// heights would hold the window tall for the next view).
void release_held_panes(QWidget* view);

/// A pane of `view` whose rows did not all fit on the image (scrolled to its top): what it is
/// ("timeline", or a table named by its first column headers: "table rank, compute, comm"), the
/// rows shown whole from the top and its rows in all (an item view's drawn rows, as show_every_row
/// counts them; the timeline's rows); rows 0 and 0 where they cannot be counted (then px counts are said).
struct CutPane {
  QString name;
  int shown_rows = 0, total_rows = 0;
  int shown_px = 0, total_px = 0;
};

/// The visible scroll areas under `view` with something left to scroll vertically, in the order
/// found. Empty when every row is on the image.
std::vector<CutPane> cut_panes(QWidget* view);

/// The sentence a cut image carries on its top: "Rows left out of this image (a pane of the
/// report shows at most 64 rows, the sharding plan 1,024, the timeline 128): timeline: rows 1-128
/// of 2,048 shown; table rank, compute, comm: rows 1-64 of 1,024 shown. Every row: open the
/// session in embedscope-ui (its pane scrolls), `embedscope stats --top 0` (...) or `embedscope
/// export SESSION --format csv` (...)." "" for no panes.
QString cut_note(const std::vector<CutPane>& panes);

/// `image` with `note` word-wrapped on a light yellow strip added above it (the view is not
/// covered); `image` itself when `note` is empty.
QImage with_cut_note(const QImage& image, const QString& note);

}  // namespace embedscope::ui
