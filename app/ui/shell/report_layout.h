#pragma once
// The report (embedscope-ui --report) renders each view as one image; panes that scroll in the
// window (the critical path, the sharding plan, the timeline of many ranks) would be cut at
// their viewport. show_every_row makes the window tall enough that none of them scrolls.

class QWidget;

namespace embedscope::ui {

/// Grows `window` (keeping its width) until no visible scroll area inside `view` (item views,
/// the timeline's scroll area) has anything left to scroll vertically, or the window is
/// `max_height` px tall. Item views are switched to per-pixel scrolling so that their
/// scroll bar counts pixels. Returns the remaining vertical overflow in px summed over the
/// scroll areas (0: every row is on the image). Cost: a few layout passes.
int show_every_row(QWidget* window, QWidget* view, int max_height = 30000);

}  // namespace embedscope::ui
