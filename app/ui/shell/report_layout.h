#pragma once
// The report (embedscope-ui --report) renders each view as one image; panes that scroll in the
// window (the critical path, the sharding plan, the timeline of many ranks) would be cut at
// their viewport. show_every_row makes the window tall enough that none of them scrolls, up to a
// bound: a 1,024-rank session's panes are shown as far as kReportMaxHeight reaches and the image
// says which rows it shows (cut_panes, with_cut_note; tester D5: 1600 x 30000 px images before).

#include <QImage>
#include <QString>

#include <vector>

class QWidget;

namespace embedscope::ui {

/// The tallest report image, px: every row of a session of up to ~100 ranks fits (its
/// timeline's 2 rows a rank at 22 px, its tables); larger sessions show their first rows.
inline constexpr int kReportMaxHeight = 6000;

/// Grows `window` (keeping its width) until no visible scroll area inside `view` (item views,
/// the timeline's scroll area) has anything left to scroll vertically, or the window is
/// `max_height` px tall. Item views are switched to per-pixel scrolling so that their
/// scroll bar counts pixels. Returns the remaining vertical overflow in px summed over the
/// scroll areas (0: every row is on the image). Cost: a few layout passes.
int show_every_row(QWidget* window, QWidget* view, int max_height = kReportMaxHeight);

/// A pane of `view` whose rows did not all fit on the image (scrolled to its top): what it is
/// ("timeline", or a table named by its first column headers: "table rank, compute, comm"), the
/// rows shown whole from the top and its rows in all (an item view's model rows; the timeline's
/// rows); rows 0 and 0 where they cannot be counted (then px counts are said).
struct CutPane {
  QString name;
  int shown_rows = 0, total_rows = 0;
  int shown_px = 0, total_px = 0;
};

/// The visible scroll areas under `view` with something left to scroll vertically, in the order
/// found. Empty when every row is on the image.
std::vector<CutPane> cut_panes(QWidget* view);

/// The sentence a cut image carries on its top: "Rows left out of this image (the report's
/// images are at most 6000 px tall): timeline: rows 1-250 of 2,048 shown; table rank, compute,
/// comm: rows 1-180 of 1,024 shown. Every row: open the session in embedscope-ui, or
/// `embedscope stats`." "" for no panes.
QString cut_note(const std::vector<CutPane>& panes);

/// `image` with `note` word-wrapped on a light yellow strip added above it (the view is not
/// covered); `image` itself when `note` is empty.
QImage with_cut_note(const QImage& image, const QString& note);

}  // namespace embedscope::ui
