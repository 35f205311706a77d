#pragma once
// A colour legend: one swatch and label per entry, in a row that wraps when it is too narrow.
// The timeline shows its categories with it (timeline_legend).

#include <QColor>
#include <QString>
#include <QWidget>

#include <vector>

namespace embedscope::ui {

/// One swatch: a filled box (or, with `line`, a thick line as the critical path is drawn).
struct LegendEntry {
  QString label;
  QColor color;
  QString tip;  ///< what the colour means, shown on hover
  bool line = false;
  bool operator==(const LegendEntry&) const = default;
};

/// The timeline's entries: the op categories (communication split into exposed and hidden),
/// set-up waits, folded runs of sub-pixel ops and the critical path, in that order, with the
/// colours the timeline paints (colors.h). With `gpu_sync` (a session with a `gpu_sync` lane) a
/// "GPU sync wait" entry (gpu_sync_color) follows "memcpy".
std::vector<LegendEntry> timeline_legend(bool gpu_sync = false, bool annotations = false);

class ColourLegend : public QWidget {
  Q_OBJECT

 public:
  explicit ColourLegend(std::vector<LegendEntry> entries, QWidget* parent = nullptr);
  const std::vector<LegendEntry>& entries() const { return entries_; }
  /// The rectangle of entry i's swatch in widget pixels (for tests and tooltips).
  QRect swatch_rect(size_t i) const;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override { return {0, row_height()}; }
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;

 protected:
  void paintEvent(QPaintEvent*) override;
  bool event(QEvent*) override;  // tooltips per entry

 private:
  int row_height() const;
  // Each entry's box (swatch and label) laid out in rows for `width`.
  std::vector<QRect> layout_for(int width) const;
  std::vector<LegendEntry> entries_;
};

}  // namespace embedscope::ui
