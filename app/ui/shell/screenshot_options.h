#pragma once
// `embedscope-ui ... --screenshot FILE.png --page NAME --size WxH`: which page of the open tab the
// screenshot shows and the window's size, so a laptop's 1280x800 (or any page at any size) can be
// checked without a display.

#include <QSize>
#include <QString>

#include <optional>

namespace embedscope::ui {

class MainWindow;

/// The window size "WIDTHxHEIGHT" names (e.g. "1280x800", also "1280X800"), px; nullopt when it
/// is not two whole numbers from 200 to 10000 joined by an x.
std::optional<QSize> parse_window_size(const QString& text);

/// Shows page `name` of the window's current tab (a session's Timeline / Summary / Load / Memory,
/// a comparison's or a scenario's Figures / Timelines / Memory / Trade-offs), matched ignoring
/// case. Returns "" on success, else why not: "--page Lod: the tab has no such page (its pages:
/// Timeline, Summary, Load, Memory)", or "--page Load: the tab has no pages" (a designer).
QString show_page(MainWindow& w, const QString& name);

}  // namespace embedscope::ui
